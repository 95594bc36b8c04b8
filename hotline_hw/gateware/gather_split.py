"""One gather request per cycle from the fragmenter's gather beats.

The fragmenter's ``gather`` stream carries up to ``lanes`` requests per beat (lane ``i`` when
``keep[i]``, :func:`hotline_hw.gateware.fragmenter.gather_layout`); the DMA takes one request
per cycle (:func:`hotline_hw.gateware.dma.gather_layout`). :class:`GatherSplitter` sends the
kept lanes of each beat in lane order, one per cycle, and takes the beat with its last kept
lane (a beat with no kept lane is taken at once).

Timing: the lane choice (the lowest lane not yet sent, a ``lanes``-way multiplexer of key and
index) ends at the output register, not in the DMA's input stage. Before this register the
choice ran on into the DMA's hazard-filter read address, the deepest path of the 4-lane
configurations (``docs/implementation.md``). The register costs one cycle of latency and
no throughput: it loads whenever it is empty or the DMA takes its request.

Reset: the top resets the splitter with the fragmenter (soft reset, ``CLEAR_STATS``), so the
beat in progress and the request held are dropped together with the fragmenter's gather
FIFO.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .dma import gather_layout as request_layout
from .fragmenter import gather_layout as beat_layout

__all__ = ["GatherSplitter"]


class GatherSplitter(wiring.Component):
    """Gather beats in, one gather request per cycle out (module docstring).

    Parameters
    ----------
    cfg : HotlineConfig
        ``lanes``, ``key_bits``, ``staging_banks`` and ``staging_index_bits`` size the
        streams.

    Attributes
    ----------
    i : In(stream of ``fragmenter.gather_layout``)
        Gather beats of the fragmenter; a beat is taken in the cycle its last kept lane is
        loaded into the output register.
    o : Out(stream of ``dma.gather_layout``)
        One request at a time from the output register; ``valid`` does not depend on
        ``ready``.
    busy : Out(1)
        A request is held in the output register (the DMA has not taken it yet).
    """

    def __init__(self, cfg):
        self.cfg = cfg
        super().__init__({
            "i": In(stream.Signature(beat_layout(cfg))),
            "o": Out(stream.Signature(request_layout(cfg))),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        L = self.cfg.lanes
        m = Module()
        i, o = self.i, self.o
        sent = Signal(L)                          # lanes of the current beat already sent
        left = Signal(L)
        m.d.comb += left.eq(i.p.keep & ~sent)
        # one-hot lowest lane left: lane j is picked when it is left and no lower lane is
        pick = [left[j] & ~left[:j].any() if j else left[0] for j in range(L)]
        last = Signal()                           # at most one lane left
        m.d.comb += last.eq((left & (left - 1))[:L] == 0)
        key, index = 0, 0                         # AND-OR multiplexer by the one-hot pick
        for j in range(L):
            key = key | Mux(pick[j], i.p.keys[j], 0)
            index = index | Mux(pick[j], i.p.indices[j], 0)

        load = ~o.valid | o.ready                 # the output register can take a request
        send = i.valid & left.any() & load
        m.d.comb += [i.ready.eq(~left.any() | (load & last)),
                     self.busy.eq(o.valid)]
        with m.If(load):
            m.d.sync += [o.valid.eq(send), o.p.key.eq(key), o.p.index.eq(index),
                         o.p.bank.eq(i.p.bank)]
        with m.If(i.valid & i.ready):
            m.d.sync += sent.eq(0)
        with m.Elif(send):
            m.d.sync += sent.eq(sent | Cat(*pick))
        return m
