"""The H3 hash in gateware: one XOR tree per output bit, masks from
:mod:`hotline_hw.hashing` (the golden model uses the same masks)."""

from amaranth.hdl import Cat, Const

from ..hashing import h3_masks

__all__ = ["h3_expr"]


def h3_expr(key, seed, key_bits, out_bits):
    """An Amaranth value of ``out_bits`` bits: the H3 hash of ``key`` (a Value of at least
    ``key_bits`` bits; higher bits are ignored). Pure logic: register it where timing needs."""
    if out_bits == 0:
        return Const(0, 0)
    bits = []
    for m in h3_masks(seed, key_bits, out_bits):
        sel = [key[i] for i in range(key_bits) if (m >> i) & 1]
        x = sel[0]
        for b in sel[1:]:
            x = x ^ b
        bits.append(x)
    return Cat(*bits)
