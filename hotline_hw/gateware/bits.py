"""Bit-counting logic shared by the units."""
from amaranth.hdl import Array, Cat, Const, Value


def _count(group):
    """The number of set bits among ``group`` (1 to 4 one-bit values) as logic alone: each
    output bit is a function of at most four inputs, one LUT4 (no adder, no carry chain)."""
    if len(group) == 1:
        return group[0]
    if len(group) == 2:
        a, b = group
        return Cat(a ^ b, a & b)
    if len(group) == 3:
        a, b, c = group
        return Cat(a ^ b ^ c, (a & b) | (a & c) | (b & c))
    a, b, c, d = group
    x, y, p, q = a ^ b, c ^ d, a & b, c & d      # a + b = 2p + x, c + d = 2q + y
    # p and x are never both 1 (nor q and y), so the sum has no carry into bit 2 but p & q
    return Cat(x ^ y, p ^ q ^ (x & y), p & q)


def popcount(bits):
    """The number of set bits among ``bits`` (one-bit values), an unsigned value wide enough
    for ``len(bits)``. Groups of four are counted by logic alone, then added pairwise as a
    balanced tree: 8 bits are a LUT level and one 3-bit adder (a chain of sums, the old form,
    was seven adders one after the other; Yosys's balancing still left three carry chains
    in a row: the deepest path of 8-lane `tiny`). 0 for no bits."""
    vals = [Value.cast(b) for b in bits]
    if not vals:
        return Const(0, 1)
    for v in vals:
        if len(v) != 1:
            raise ValueError(f"popcount takes one-bit values, got a {len(v)}-bit one")
    level = [_count(vals[i:i + 4]) for i in range(0, len(vals), 4)]
    while len(level) > 1:
        level = [level[i] + level[i + 1] if i + 1 < len(level) else level[i]
                 for i in range(0, len(level), 2)]
    return level[0]


def need_bit(bits, n):
    """Whether the first ``n`` of ``bits`` are set, given ``bits`` as prefix ANDs (bit ``k``:
    entries ``0 .. k`` qualify): bit ``n - 1``, and 1 for ``n = 0``."""
    return Array([Const(1, 1)] + [bits[k] for k in range(len(bits))])[n]
