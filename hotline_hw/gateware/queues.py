"""A small register queue that takes several entries and gives several entries per cycle.

The fragmenter moves up to ``lanes`` misses per cycle into the de-dup banks and takes up to
``lanes`` results back out of them; block RAM FIFOs give one entry per cycle, so these queues
are registers (a few entries each).
"""

from amaranth.hdl import Array, Elaboratable, Module, Shape, Signal
from amaranth.lib import data
from amaranth.utils import ceil_log2

__all__ = ["MultiQueue"]


class MultiQueue(Elaboratable):
    """A queue of ``depth`` register entries (``depth`` a power of two).

    Ports (plain signals)
    ---------------------
    push_n : ``In``, 0..npush
        Entries appended this cycle (the caller keeps ``push_n <= space``).
    wr_en, wr_off, wr_data : ``In``, ``npush`` of each
        Where the appended entries come from: writer ``i`` (``wr_en[i]``) stores
        ``wr_data[i]`` at place ``wr_off[i]`` behind the tail; the writers' offsets are
        ``0 .. push_n - 1``, each once. (Writers are the lanes of a beat, so no lane-to-entry
        compaction is needed before the queue.)
    pop_n : ``In``, 0..npop
        Entries removed from the head this cycle (the caller keeps ``pop_n <= level``).
    peek : ``Out``, ``ArrayLayout(layout, npop)``
        ``peek[i]`` is the entry ``i`` places behind the head (meaningless for ``i >= level``).
    level, space : ``Out``
        Entries held, and free places (``depth - level``), before this cycle's push and pop.
    upd_en, upd_off, upd_data : ``In``
        With ``update=True``: overwrite the held entry ``upd_off`` places behind the head
        (the caller keeps ``upd_off < level``; an entry popped in the same cycle is lost).
    at(off) :
        The entry ``off`` places behind the head, for any ``off`` (a mux over the entries).

    A pushed entry is visible (``level``, ``peek``) from the next cycle.
    """

    def __init__(self, layout, depth, npush, npop, *, update=False, name="q"):
        assert depth & (depth - 1) == 0 and depth >= 2, depth
        self.layout, self.depth, self.npush, self.npop = layout, depth, npush, npop
        self.update = update
        self.name = name
        bits = ceil_log2(depth)
        self._bits = bits
        self.push_n = Signal(range(npush + 1), name=f"{name}_push_n")
        self.wr_en = Signal(npush, name=f"{name}_wr_en")
        self.wr_off = Signal(data.ArrayLayout(ceil_log2(max(2, npush)), npush),
                             name=f"{name}_wr_off")
        self.wr_data = Signal(data.ArrayLayout(layout, npush), name=f"{name}_wr_data")
        self.pop_n = Signal(range(npop + 1), name=f"{name}_pop_n")
        self.peek = Signal(data.ArrayLayout(layout, npop), name=f"{name}_peek")
        self.level = Signal(range(depth + 1), name=f"{name}_level")
        self.space = Signal(range(depth + 1), name=f"{name}_space")
        self.upd_en = Signal(name=f"{name}_upd_en")
        self.upd_off = Signal(bits, name=f"{name}_upd_off")
        self.upd_data = Signal(layout, name=f"{name}_upd_data")
        self.head = Signal(bits, name=f"{name}_head")
        self._width = layout.size if isinstance(layout, data.Layout) else Shape.cast(layout).width
        self.entries = [Signal(self._width, name=f"{name}_e{i}") for i in range(depth)]
        self._array = Array(self.entries)

    def at(self, off):
        v = self._array[(self.head + off)[:self._bits]]
        return data.View(self.layout, v) if isinstance(self.layout, data.Layout) else v

    def elaborate(self, platform):
        m = Module()
        bits = self._bits
        tail = Signal(bits, name=f"{self.name}_tail")
        m.d.comb += [
            tail.eq(self.head + self.level),
            self.space.eq(self.depth - self.level),
        ]
        for i in range(self.npop):
            m.d.comb += self.peek[i].eq(self.at(i))
        for j, e in enumerate(self.entries):
            off = Signal(bits, name=f"{self.name}_off{j}")
            m.d.comb += off.eq(j - tail)
            for k in range(self.npush):
                with m.If(self.wr_en[k] & (off == self.wr_off[k])):
                    m.d.sync += e.eq(self.wr_data[k])
            if self.update:
                with m.If(self.upd_en & ((self.head + self.upd_off)[:bits] == j)):
                    m.d.sync += e.eq(self.upd_data)
        m.d.sync += [
            self.head.eq(self.head + self.pop_n),
            self.level.eq(self.level + self.push_n - self.pop_n),
        ]
        return m

