"""The shared bit-counting logic (hotline_hw/gateware/bits.py), exhaustively."""
import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from hotline_hw.gateware.bits import popcount


@pytest.mark.parametrize("n", range(0, 10))
def test_popcount_every_input(n):
    x = Signal(max(1, n))
    out = popcount(x[i] for i in range(n))
    assert (1 << len(out)) > n                       # wide enough for n
    y = Signal(len(out))
    m = Module()
    m.d.comb += y.eq(out)
    wrong = []

    async def tb(ctx):
        for v in range(1 << n):
            ctx.set(x, v)
            if ctx.get(y) != bin(v).count("1"):
                wrong.append((v, ctx.get(y)))

    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()
    assert not wrong, wrong[:5]


def test_popcount_takes_one_bit_values():
    with pytest.raises(ValueError, match="one-bit"):
        popcount([Signal(2)])
