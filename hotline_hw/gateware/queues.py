"""A small register queue that takes several entries and gives several entries per cycle.

The fragmenter moves up to ``lanes`` misses per cycle into the de-dup banks and takes up to
``lanes`` results back out of them; block RAM FIFOs give one entry per cycle, so these queues
are registers (a few entries each).

* :class:`MultiQueue` shifts its entries toward the head: ``peek`` and ``at(off)`` read
  flip-flops (or one mux by ``off``), at the cost of an ``npop + 1``-way choice per entry. The
  de-dup banks' result queue uses it: the fragmenter's take stage reads its head entries.
* :class:`RingQueue` keeps its entries in place (head and tail registers): a write decode per
  entry, about a quarter of the logic (ulx3s, 4 writers x 4 entries of 37 bits: 604 LUT4
  against 2,291). The banks' input and index queues use it: their readers take one entry a
  cycle, or read at a slot known from an ordinal.
* :class:`PeekFIFO` is a ``SyncFIFOBuffered`` that also shows the entry its output register
  loads next: the fragmenter's beat FIFO, whose reader registers a decision about the next
  beat a cycle ahead.
"""

from amaranth.hdl import Array, Cat, Const, Elaboratable, Module, Mux, Shape, Signal, Value
from amaranth.lib import data
from amaranth.lib.memory import Memory
from amaranth.utils import ceil_log2

__all__ = ["MultiQueue", "PeekFIFO", "RingQueue"]


def _by_count(cands, n, en, m=None, name=None):
    """``cands[n]`` when ``en``, else ``cands[0]``: the value after ``n`` (or no) pushes or
    pops, with the late ``en`` in the last 2:1 mux.

    With ``m`` (and ``name``), ``cands[n]`` is a signal of its own marked ``keep``: the LUT
    mapper then cannot fold the count select into the logic after ``en``, which stays one
    LUT ahead of the register. (Left to itself, ABC had put ``en``, the fragmenter's take
    handshake, three LUTs ahead of the de-dup result queues' registers, on the ``ulx3s``
    route's third worst path.)"""
    sel = Array(cands)[n]
    if m is not None:
        kept = Signal(len(Value.cast(cands[0])), name=name, attrs={"keep": 1})
        m.d.comb += kept.eq(sel)
        sel = kept
    return Mux(en, sel, cands[0])


def _common_ports(q, layout, depth, npush, npop, name):
    """The ports both queues share (push side, ``pop_n``, ``peek``, ``level``, ``space``),
    set on ``q``; returns ``ceil_log2(depth)`` (also ``q._bits``)."""
    q._bits = bits = ceil_log2(depth)
    q.push_n = Signal(range(npush + 1), name=f"{name}_push_n")
    q.wr_en = Signal(npush, name=f"{name}_wr_en")
    q.wr_off = Signal(data.ArrayLayout(ceil_log2(max(2, npush)), npush), name=f"{name}_wr_off")
    q.wr_data = Signal(data.ArrayLayout(layout, npush), name=f"{name}_wr_data")
    q.push_en = Signal(name=f"{name}_push_en", init=1)
    q.pop_n = Signal(range(npop + 1), name=f"{name}_pop_n")
    q.pop_en = Signal(name=f"{name}_pop_en", init=1)
    q.peek = Signal(data.ArrayLayout(layout, npop), name=f"{name}_peek")
    q.level = Signal(range(depth + 1), name=f"{name}_level")
    q.space = Signal(range(depth + 1), name=f"{name}_space", init=depth)
    q.space_drained = None               # (RingQueue's option)
    return bits


def _count_regs(m, q):
    """``level`` and ``space`` after this cycle's push and pop: four candidates per pop
    count, built from registers and the counts, chosen by ``push_en`` and ``pop_en`` last."""
    bl = len(q.level)
    npop = q.npop
    lvl, spc = [], []
    for push in (0, 1):
        pn = q.push_n if push else Const(0, 1)
        lvl.append([(q.level + pn - Const(p, bl))[:bl] for p in range(npop + 1)])
        spc.append([(q.space + Const(p, bl) - pn)[:bl] for p in range(npop + 1)])
    m.d.sync += [
        q.level.eq(Mux(q.push_en, _by_count(lvl[1], q.pop_n, q.pop_en),
                       _by_count(lvl[0], q.pop_n, q.pop_en))),
        q.space.eq(Mux(q.push_en, _by_count(spc[1], q.pop_n, q.pop_en),
                       _by_count(spc[0], q.pop_n, q.pop_en))),
    ]
    if q.space_drained is not None:
        # space + (level != 0) of each candidate, chosen the same way
        sdr = [[(spc[u][p] + (lvl[u][p] != 0))[:bl] for p in range(npop + 1)] for u in (0, 1)]
        m.d.sync += q.space_drained.eq(Mux(q.push_en, _by_count(sdr[1], q.pop_n, q.pop_en),
                                           _by_count(sdr[0], q.pop_n, q.pop_en)))


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
    push_en, pop_en : ``In``, 1 bit (reset value 1: left undriven they change nothing)
        The push and the pop happen only with these high: ``push_n`` / ``pop_n`` entries when
        high, none when low. A caller whose handshake decides *whether* late in the cycle
        but knows *how many* from registers drives ``pop_n`` (``push_n``) with the count and
        ``pop_en`` (``push_en``) with the handshake, which then only drives each register's
        final 2:1 mux instead of the select of an ``npop + 1``-way one. ``wr_en`` need not
        include the handshake either: with ``push_en`` low nothing visible is stored, even
        by writers at offsets past the free places (:class:`RingQueue` gates its writes;
        here such a writer lands past the tail, in places that are not held).
    peek : ``Out``, ``ArrayLayout(layout, npop)``
        ``peek[i]`` is the entry ``i`` places behind the head (meaningless for ``i >= level``).
    level, space : ``Out``
        Entries held, and free places (``depth - level``), before this cycle's push and pop.
    upd_en, upd_off, upd_data : ``In``
        With ``update=True``: overwrite the held entry ``upd_off`` places behind the head
        (the caller keeps ``upd_off < level``; an entry popped in the same cycle is lost).
        With ``update=(lo, hi)``: overwrite only bits ``lo .. hi - 1`` of it (the other bits
        of ``upd_data`` are ignored): a field the caller never changes costs no update mux.
    at(off) :
        The entry ``off`` places behind the head, for any ``off`` (a mux over the entries).

    A pushed entry is visible (``level``, ``peek``) from the next cycle.

    Timing
    ------
    The queue shifts: register ``entries[j]`` holds the entry ``j`` places behind the head,
    so ``peek`` is straight from flip-flops and ``at(off)`` is one mux indexed by ``off``
    (no head pointer to add). Each entry's next value is chosen among ``npop + 1``
    candidates (one per possible ``pop_n``) that do not depend on ``pop_n``, so ``pop_n``,
    typically the latest signal of the caller's handshake, only drives the last mux. ``level``
    and ``space`` are registers, updated the same way.
    """

    def __init__(self, layout, depth, npush, npop, *, update=False, name="q"):
        assert depth & (depth - 1) == 0 and depth >= 2, depth
        self.layout, self.depth, self.npush, self.npop = layout, depth, npush, npop
        self.update = bool(update)
        self.name = name
        bits = _common_ports(self, layout, depth, npush, npop, name)
        self.upd_en = Signal(name=f"{name}_upd_en")
        self.upd_off = Signal(bits, name=f"{name}_upd_off")
        self.upd_data = Signal(layout, name=f"{name}_upd_data")
        self._width = layout.size if isinstance(layout, data.Layout) else Shape.cast(layout).width
        self._upd_bits = (0, self._width) if update is True else tuple(update or (0, 0))
        self.entries = [Signal(self._width, name=f"{name}_e{i}") for i in range(depth)]
        self._array = Array(self.entries)

    def at(self, off):
        v = self._array[off[:self._bits]] if len(off) > self._bits else self._array[off]
        return data.View(self.layout, v) if isinstance(self.layout, data.Layout) else v

    def elaborate(self, platform):
        m = Module()
        depth, npop, w = self.depth, self.npop, self._width
        for i in range(npop):
            m.d.comb += self.peek[i].eq(self.entries[i])
        # wpos[s]: a writer lands on place s behind the (old) head; wsel[s]: its data
        wpos, wsel = [], []
        for s in range(depth):
            off = Signal(self._bits + 1, name=f"{self.name}_woff{s}")
            m.d.comb += off.eq(s - self.level)
            hit = Signal(name=f"{self.name}_wpos{s}")
            dat = Signal(w, name=f"{self.name}_wdat{s}")
            for k in range(self.npush):
                mk = self.wr_en[k] & (off == self.wr_off[k])
                with m.If(mk):
                    m.d.comb += [hit.eq(1), dat.eq(self.wr_data[k])]
            wpos.append(hit)
            wsel.append(dat)
        for j, e in enumerate(self.entries):
            cands = []
            for p in range(npop + 1):          # the value of entry j if pop_n == p
                s = j + p
                if s >= depth:                 # nothing can land there (push_n <= space)
                    cands.append(e)
                    continue
                c = Signal(w, name=f"{self.name}_n{j}_{p}")
                m.d.comb += c.eq(self.entries[s])
                if self.update:
                    lo, hi = self._upd_bits
                    with m.If(self.upd_en & (self.upd_off == s)):
                        m.d.comb += c[lo:hi].eq(self.upd_data.as_value()[lo:hi]
                                                if isinstance(self.layout, data.Layout)
                                                else self.upd_data[lo:hi])
                with m.If(wpos[s]):
                    m.d.comb += c.eq(wsel[s])
                cands.append(c)
            if npop == 0:
                m.d.sync += e.eq(cands[0])
            else:
                m.d.sync += e.eq(_by_count(cands, self.pop_n, self.pop_en, m,
                                           f"{self.name}_sel{j}"))
        _count_regs(m, self)
        return m


class RingQueue(Elaboratable):
    """A circular queue of ``depth`` register entries (``depth`` a power of two): the push side
    and ``level`` / ``space`` of :class:`MultiQueue`, without updates.

    Entries stay where they were written; registers ``head`` and ``tail`` (``head + level``,
    modulo ``depth``) say where the queue starts and ends. Each entry is written at most
    once per cycle by the writer whose ``wr_off`` equals its distance behind ``tail`` (a
    compare with a value derived from a register), and is otherwise kept: no entry chooses
    among ``npop + 1`` candidates as in :class:`MultiQueue`, about a quarter of its logic.

    Ports (plain signals)
    ---------------------
    push_n, push_en, wr_en, wr_off, wr_data, pop_n, pop_en, level, space :
        As in :class:`MultiQueue` (``npush`` writers, ``pop_n`` in ``0 .. npop``).
    peek : ``Out``, ``ArrayLayout(layout, npop)``
        ``peek[i]`` is the entry ``i`` places behind the head (meaningless for ``i >= level``).
        With ``registered_peek=True`` these are flip-flops (a copy of the first ``npop``
        entries, updated like the entries of :class:`MultiQueue`, so ``pop_n`` only drives
        their last mux); otherwise a mux over the entries selected by ``head``.
    head : ``Out``, ``ceil_log2(depth)`` bits
        Where the head entry is: the entry pushed ``n`` pushes after a ``restart`` (or after
        reset) is at ``n % depth`` (see :meth:`at_slot`).
    restart : ``In``
        With the queue empty: ``head`` and ``tail`` return to 0 (so a caller that counts its
        pushes from that cycle on knows where each entry is). Must not be raised while the
        queue holds entries or is pushed.
    at_slot(slot) :
        The entry at place ``slot`` (absolute, ``0 .. depth - 1``; the entry ``k`` places
        behind the head is at ``(head + k) % depth``): one mux indexed by ``slot``.

    space_drained : ``Out``, only with ``space_drained=True``
        ``space + (level != 0)``, a register: the space once this cycle's pop is done, for a
        consumer that pops one entry every cycle the queue is not empty (``pop_n = level !=
        0``), so a producer compares its need with a flip-flop, not with ``space`` plus a
        pop count derived from ``level``.

    A pushed entry is visible (``level``, ``peek``) from the next cycle.
    """

    def __init__(self, layout, depth, npush, npop, *, registered_peek=False,
                 space_drained=False, name="q"):
        assert depth & (depth - 1) == 0 and depth >= 2, depth
        assert npop <= depth and npush <= depth, (npop, npush, depth)
        self.layout, self.depth, self.npush, self.npop = layout, depth, npush, npop
        self.registered_peek = registered_peek
        self.name = name
        bits = _common_ports(self, layout, depth, npush, npop, name)
        self.space_drained = (Signal(range(depth + 1), name=f"{name}_space_drained",
                                     init=depth) if space_drained else None)
        self.head = Signal(bits, name=f"{name}_head")
        self.tail = Signal(bits, name=f"{name}_tail")
        self.restart = Signal(name=f"{name}_restart")
        self._width = layout.size if isinstance(layout, data.Layout) else Shape.cast(layout).width
        self.entries = [Signal(self._width, name=f"{name}_e{i}") for i in range(depth)]
        self._array = Array(self.entries)

    def at_slot(self, slot):
        v = self._array[slot[:self._bits]] if len(slot) > self._bits else self._array[slot]
        return data.View(self.layout, v) if isinstance(self.layout, data.Layout) else v

    def _written(self, m, dist, tag):
        """``(hit, data)``: a writer lands ``dist`` places behind the tail, and its data."""
        hit = Signal(name=f"{self.name}_{tag}_hit")
        dat = Signal(self._width, name=f"{self.name}_{tag}_dat")
        for k in range(self.npush):
            with m.If(self.wr_en[k] & (dist == self.wr_off[k])):
                m.d.comb += [hit.eq(1), dat.eq(self.wr_data[k])]
        return hit, dat

    def elaborate(self, platform):
        m = Module()
        depth, npop, bits, w = self.depth, self.npop, self._bits, self._width
        # --- the ring: entry e is written by the writer `(e - tail) % depth` behind the tail
        for e, ent in enumerate(self.entries):
            dist = Signal(bits, name=f"{self.name}_d{e}")
            m.d.comb += dist.eq(Const(e, bits) - self.tail)
            hit, dat = self._written(m, dist, f"w{e}")
            with m.If(hit & self.push_en):
                m.d.sync += ent.eq(dat)
        # --- peek
        if not self.registered_peek:
            for i in range(npop):
                rot = Array(self.entries[(j + i) % depth] for j in range(depth))
                m.d.comb += self.peek[i].eq(rot[self.head])
        else:
            # peek[j] next = the entry j + p places behind the old head if pop_n == p: from
            # peek (j + p < npop) or from the ring (a mux by the register `head`), or the
            # writer landing there this cycle; pop_n selects last.
            bl = len(self.level)
            for j in range(npop):
                cands = []
                for p in range(npop + 1):
                    s = j + p
                    if s >= depth:
                        cands.append(self.peek[j])
                        continue
                    if s < npop:
                        old = self.peek[s].as_value() if isinstance(self.layout, data.Layout) \
                            else self.peek[s]
                    else:
                        old = Array(self.entries[(x + s) % depth] for x in range(depth))[self.head]
                    dist = Signal(bl + 1, name=f"{self.name}_pd{j}_{p}")
                    m.d.comb += dist.eq(s - self.level)
                    hit, dat = self._written(m, dist, f"p{j}_{p}")
                    c = Signal(w, name=f"{self.name}_pn{j}_{p}")
                    m.d.comb += c.eq(Mux(hit & self.push_en, dat, old))
                    cands.append(c)
                m.d.sync += self.peek[j].eq(_by_count(cands, self.pop_n, self.pop_en, m,
                                                      f"{self.name}_psel{j}"))
        # --- pointers and counts
        _count_regs(m, self)
        hd = [(self.head + p)[:bits] for p in range(npop + 1)]
        m.d.sync += [self.head.eq(_by_count(hd, self.pop_n, self.pop_en)),
                     self.tail.eq(Mux(self.push_en, (self.tail + self.push_n)[:bits],
                                      self.tail))]
        with m.If(self.restart):
            m.d.sync += [self.head.eq(0), self.tail.eq(0)]
        return m


class PeekFIFO(Elaboratable):
    """A ``SyncFIFOBuffered`` (same ports, same cycle behaviour) that also shows the entry
    its output register loads next.

    ``r_data`` is a register loaded from a LUT RAM (``depth - 1`` entries) when it is empty
    or read; ``next_data`` is bits ``peek`` (a ``slice``; all by default) of that RAM's
    asynchronous read at the read pointer, valid while ``next_rdy`` (the RAM holds an
    entry). A reader can then decide in the cycle before an
    entry reaches ``r_data`` (the fragmenter's take stage registers its "the head beat may
    leave" from the next beat's need). The peek bits are kept in a small RAM of their own,
    with its own copies of the pointers (``register_copies``), so that its read is not
    behind the wide RAM's read-address net.

    ``block_ram``: only the ``peek`` bits are kept in the asynchronous-read RAM; the others
    are in a RAM with a synchronous read port, whose output register is their part of
    ``r_data`` (same cycle behaviour). For FPGAs without LUT RAM (iCE40), where an
    asynchronous read is built of flip-flops and multiplexers and a synchronous one maps to
    block RAM.

    Ports: ``w_en``, ``w_data``, ``w_rdy``, ``r_en``, ``r_data``, ``r_rdy``, ``level`` (as
    ``SyncFIFOBuffered``), ``next_data``, ``next_rdy``.
    """

    def __init__(self, *, width, depth, peek=None, block_ram=False):
        assert depth >= 3
        self.width, self.depth = width, depth
        self.peek = peek if peek is not None else slice(0, width)
        assert self.peek.step in (None, 1)
        self.block_ram = block_ram
        self.register_copies = []           # (LUT RAM mode: sim/register_copies.py)
        self.w_en = Signal()
        self.w_data = Signal(width)
        self.w_rdy = Signal()
        self.r_en = Signal()
        self.r_data = Signal(width, reset_less=True)
        self.r_rdy = Signal()
        self.level = Signal(range(depth + 1))
        self.next_data = Signal(len(range(width)[self.peek]))
        self.next_rdy = Signal()

    def elaborate(self, platform):
        m = Module()
        inner_depth = self.depth - 1
        inner_level = Signal(range(inner_depth + 1))
        m.d.comb += [self.w_rdy.eq(inner_level != inner_depth),
                     self.next_rdy.eq(inner_level != 0)]
        do_write = self.w_rdy & self.w_en
        do_inner_read = self.next_rdy & (~self.r_rdy | self.r_en)

        lo, hi, _ = self.peek.indices(self.width)
        rest = self.width - (hi - lo)        # the bits outside the peek
        if not self.block_ram and rest:
            m.submodules.storage = storage = Memory(shape=rest, depth=inner_depth, init=[])
            w_port = storage.write_port()
            r_port = storage.read_port(domain="comb")
        produce = Signal(range(inner_depth))
        consume = Signal(range(inner_depth))

        def incr(v):
            return Mux(v == inner_depth - 1, 0, v + 1)

        def peek_ram(w_addr, r_addr):
            """The peek bits' RAM (asynchronous read, at ``r_addr``); returns its read port."""
            m.submodules.peek_storage = pst = Memory(shape=hi - lo, depth=inner_depth, init=[])
            pw, pr = pst.write_port(), pst.read_port(domain="comb")
            m.d.comb += [pw.addr.eq(w_addr), pw.data.eq(self.w_data[lo:hi]),
                         pw.en.eq(do_write), pr.addr.eq(r_addr), self.next_data.eq(pr.data)]
            return pr

        if not self.block_ram:
            rest_q = Const(0, 0)
            if rest:
                m.d.comb += [w_port.addr.eq(produce),
                             w_port.data.eq(Cat(self.w_data[:lo], self.w_data[hi:])),
                             w_port.en.eq(do_write), r_port.addr.eq(consume)]
                rest_q = r_port.data
            # The peek bits in a small RAM of their own, addressed by pointer copies of its
            # own (timing: the read pointer of the wide RAM reaches every one of its LUT RAM
            # slices, ~50 on the fragmenter's beat FIFO, and the peek bits came out of it
            # after that net; the small RAM and its pointers can sit by the reader). The
            # copies are the pointers plus one (reset to 1), so that Yosys, which merges
            # flip-flops with equal inputs and resets, keeps them apart.
            produce_p = Signal(range(inner_depth), init=1, name="produce_p")
            consume_p = Signal(range(inner_depth), init=1, name="consume_p")
            pr = peek_ram(produce_p, consume_p)
            self.register_copies = [("peek pointers: produce + 1", incr(produce), produce_p),
                                    ("peek pointers: consume + 1", incr(consume), consume_p)]
            with m.If(do_write):
                m.d.sync += [produce.eq(incr(produce)), produce_p.eq(incr(produce_p))]
            with m.If(do_inner_read):
                m.d.sync += [consume.eq(incr(consume)), consume_p.eq(incr(consume_p)),
                             self.r_data.eq(Cat(rest_q[:lo], pr.data, rest_q[lo:]))]
        else:
            # the peek bits: asynchronous read, registered into r_data on a read
            pr = peek_ram(produce, consume)
            peek_q = Signal(hi - lo, reset_less=True)
            with m.If(do_inner_read):
                m.d.sync += peek_q.eq(pr.data)
            if rest:
                # the other bits: a synchronous read of the same entry on the same cycle
                # (never the entry being written: a write needs a free place, and the read
                # one holds an entry), its output register holding them until the next read
                m.submodules.storage = storage = Memory(shape=rest, depth=inner_depth,
                                                        init=[])
                w_port = storage.write_port()
                r_port = storage.read_port(transparent_for=())
                m.d.comb += [w_port.addr.eq(produce),
                             w_port.data.eq(Cat(self.w_data[:lo], self.w_data[hi:])),
                             w_port.en.eq(do_write), r_port.addr.eq(consume),
                             r_port.en.eq(do_inner_read),
                             self.r_data.eq(Cat(r_port.data[:lo], peek_q,
                                                r_port.data[lo:]))]
            else:
                m.d.comb += self.r_data.eq(peek_q)
            with m.If(do_write):
                m.d.sync += produce.eq(incr(produce))
            with m.If(do_inner_read):
                m.d.sync += consume.eq(incr(consume))
        with m.If(do_write & ~do_inner_read):
            m.d.sync += inner_level.eq(inner_level + 1)
        with m.If(do_inner_read & ~do_write):
            m.d.sync += inner_level.eq(inner_level - 1)
        with m.If(do_inner_read):
            m.d.sync += self.r_rdy.eq(1)
        with m.Elif(self.r_en):
            m.d.sync += self.r_rdy.eq(0)
        m.d.comb += self.level.eq(inner_level + self.r_rdy)
        return m
