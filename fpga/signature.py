"""Signatures of the board self-check, in Python (build time) and in Amaranth (on chip).

Two kinds, both defined here once so the expected values and the hardware agree:

* :func:`misr_step` / :class:`Misr`: a 32-bit multiple-input signature register (a Galois
  LFSR, primitive polynomial ``x^32 + x^22 + x^2 + x + 1``, into which each input word is
  XORed). It is order-sensitive: used for the two output streams (beats arrive in a defined
  order) and for the statistics read at the end. An input wider than 32 bits is first folded
  into 32 bits by :func:`fold` (XOR of its 32-bit chunks, chunk ``i`` rotated left by
  ``13 * i``).
* :func:`wsum_step` / :class:`BeatSum`: an order-independent signature of the AXI write beats
  (the DMA may interleave rows of different jobs in an order the golden model does not fix):
  the number of beats (16 bits) and the 32-bit wrapping sum of ``fold(addr, data, strb)`` of
  each.

The signatures are 32 bits wide (they were 64): the UART line shows them whole, and on the
iCE40 HX8K the 64-bit ones cost a few hundred logic cells the accelerator needs. A wrong
result escapes a 32-bit MISR with probability ~2^-32, per signature and run.
"""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["W", "COUNT_BITS", "MISR_POLY", "fold", "fold_hdl", "misr_step", "wsum_step",
           "Misr", "BeatSum"]

#: width of every signature
W = 32
MASK = (1 << W) - 1
#: width of the W-beat count
COUNT_BITS = 16
MISR_POLY = 0x0040_0007     # x^32 + x^22 + x^2 + x + 1 (low terms)


def _rotl(v, r):
    r %= W
    return ((v << r) | (v >> (W - r))) & MASK if r else v


def fold(value, width):
    """``value`` (``width`` bits) folded into ``W`` bits."""
    out = 0
    for i in range((width + W - 1) // W):
        out ^= _rotl((value >> (W * i)) & MASK, 13 * i)
    return out


def misr_step(state, word):
    """Next MISR state after taking the ``W``-bit ``word``."""
    fb = state >> (W - 1)
    return (((state << 1) & MASK) ^ (MISR_POLY if fb else 0)) ^ word


def wsum_step(state, word):
    """``(count, sum)`` after one more write beat whose folded value is ``word``."""
    count, total = state
    return (count + 1) & ((1 << COUNT_BITS) - 1), (total + word) & MASK


def fold_hdl(value):
    """The HDL twin of :func:`fold` (``value`` an Amaranth value)."""
    width = len(value)
    pad = Cat(value, Const(0, (-width) % W)) if width % W else value
    out = None
    for i in range(len(pad) // W):
        chunk = pad[W * i:W * (i + 1)]
        r = (13 * i) % W
        rot = Cat(chunk[W - r:], chunk[:W - r]) if r else chunk
        out = rot if out is None else out ^ rot
    return out


class Misr(wiring.Component):
    """On-chip :func:`misr_step`: when ``en``, take ``fold(word)``; ``clear`` restarts at 0
    (``clear`` wins).

    ``width``: bits of ``word``; ``state``: the ``W``-bit signature."""

    def __init__(self, width):
        super().__init__({"word": In(width), "en": In(1), "clear": In(1), "state": Out(W)})

    def elaborate(self, platform):
        m = Module()
        s = self.state
        word = fold_hdl(self.word)
        nxt = Cat(Const(0, 1), s[:W - 1]) ^ (Const(MISR_POLY, W) & s[W - 1].replicate(W)) ^ word
        with m.If(self.clear):
            m.d.sync += s.eq(0)
        with m.Elif(self.en):
            m.d.sync += s.eq(nxt)
        return m


class BeatSum(wiring.Component):
    """On-chip :func:`wsum_step`: when ``en``, count one more beat (``count``, ``COUNT_BITS``,
    wrapping) and add ``fold(word)`` (``width`` bits) to ``total`` (``W`` bits, wrapping);
    ``clear`` restarts both at 0. Both lag ``en`` by one cycle (a register stage)."""

    def __init__(self, width):
        super().__init__({"word": In(width), "en": In(1), "clear": In(1),
                          "count": Out(COUNT_BITS), "total": Out(W)})

    def elaborate(self, platform):
        m = Module()
        word = Signal(W)
        en = Signal()
        # one register stage between the fold and the adder: the fold of a wide beat is an
        # XOR tree, the sum a carry chain
        m.d.sync += [word.eq(fold_hdl(self.word)), en.eq(self.en & ~self.clear)]
        with m.If(self.clear):
            m.d.sync += [self.count.eq(0), self.total.eq(0)]
        with m.Elif(en):
            m.d.sync += [self.count.eq(self.count + 1), self.total.eq(self.total + word)]
        return m
