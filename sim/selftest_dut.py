"""A tiny DUT for the self-test of the simulation infrastructure (``tests/sim/test_infra.py``).

:class:`AddOne` takes beats ``{tag, value, lanes}`` on ``i``, and gives them back on ``o`` one
cycle later with ``value + 1`` (modulo ``2**value_bits``) and each lane + 1: a one-deep
registered pipeline stage with full backpressure. ``ev`` (valid-only, no ready) pulses with
the ``tag`` of every beat ``i`` accepts. Its widths come from a :class:`HotlineConfig` so that
the runner's config plumbing is exercised: ``lanes`` lanes of ``table_bits`` bits.
Its golden model is ``ref_add_one`` in ``sim/tb_selftest.py`` (no Amaranth in the simulator).
"""

from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AddOne", "AxisPass", "add_one_dropping_valid", "beat_layout"]


def beat_layout(cfg):
    return data.StructLayout({
        "tag": 4,
        "value": 8,
        "lanes": data.ArrayLayout(cfg.table_bits, cfg.lanes),
    })


class AddOne(wiring.Component):
    """Registered ``+1`` with backpressure.

    Members
    -------
    i : ``In(stream.Signature(beat_layout(cfg)))``
    o : ``Out(stream.Signature(beat_layout(cfg)))``
    ev : ``Out(stream.Signature(4, always_ready=True))``: the tag of each accepted input beat.

    Latency: 1 cycle from ``i`` to ``o``; ``i.ready = ~o.valid | o.ready``.
    """

    def __init__(self, cfg, *, bug=None):
        if bug not in (None, "drop_valid"):
            raise ValueError(f"bug={bug!r}: None or 'drop_valid'")
        self.cfg = cfg
        self.bug = bug      # "drop_valid": o.valid lasts one cycle (breaks the stream rule)
        layout = beat_layout(cfg)
        super().__init__({
            "i": In(stream.Signature(layout)),
            "o": Out(stream.Signature(layout)),
            "ev": Out(stream.Signature(4, always_ready=True)),
        })

    def elaborate(self, platform):
        m = Module()
        take = self.i.valid & self.i.ready
        m.d.comb += self.i.ready.eq(~self.o.valid | self.o.ready)
        with m.If(self.o.ready if self.bug is None else 1):
            m.d.sync += self.o.valid.eq(0)
        with m.If(take):
            m.d.sync += [
                self.o.valid.eq(1),
                self.o.payload.tag.eq(self.i.payload.tag),
                self.o.payload.value.eq(self.i.payload.value + 1),
            ]
            for k in range(self.cfg.lanes):
                m.d.sync += self.o.payload.lanes[k].eq(self.i.payload.lanes[k] + 1)
        m.d.comb += [self.ev.valid.eq(take), self.ev.payload.eq(self.i.payload.tag)]
        return m


def add_one_dropping_valid(cfg):
    """:class:`AddOne` with a protocol bug, for the test that the stream checkers catch it."""
    return AddOne(cfg, bug="drop_valid")


def _axis(data_bits):
    return wiring.Signature({
        "tdata": Out(data_bits), "tkeep": Out(data_bits // 8), "tlast": Out(1),
        "tvalid": Out(1), "tready": In(1),
    })


class AxisPass(wiring.Component):
    """A registered AXI4-Stream stage, ``s_axis`` -> ``m_axis`` (32-bit ``tdata``): checks
    that the naming rule gives cocotbext-axi the names it expects (``s_axis_tdata``, ...).

    Latency: 1 cycle; ``s_axis.tready = ~m_axis.tvalid | m_axis.tready``.
    """

    def __init__(self, cfg=None):
        super().__init__({"s_axis": In(_axis(32)), "m_axis": Out(_axis(32))})

    def elaborate(self, platform):
        m = Module()
        s, o = self.s_axis, self.m_axis
        m.d.comb += s.tready.eq(~o.tvalid | o.tready)
        with m.If(s.tready):
            m.d.sync += [o.tvalid.eq(s.tvalid), o.tdata.eq(s.tdata), o.tkeep.eq(s.tkeep),
                         o.tlast.eq(s.tlast)]
        return m
