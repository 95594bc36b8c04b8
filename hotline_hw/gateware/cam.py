"""The popularity CAM: key -> (hit, slot), ``lanes`` lookups per cycle, fixed latency.

The bit-accurate model is :class:`golden.cam.Cam`; this unit matches its ``lookup``,
``write``, ``contents`` and ``clear`` bit for bit.
"""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..hashing import SEED_CAM
from .hash import h3_expr

__all__ = ["PopularityCAM"]


def _priority(flags, payloads=None):
    """Log-depth priority encoder over a list of 1-bit values, lowest index first.

    Returns ``(any, index, payload)``: whether any flag is set, the index of the lowest set
    flag (``ceil_log2(len(flags))`` bits, 0 if none) and, if ``payloads`` is given, the payload
    of that flag (the last one's if none is set; callers mask with ``any``).
    """
    n = len(flags)
    if payloads is None:
        payloads = [Const(0, 0)] * n
    if n == 1:
        return flags[0], Const(0, 0), payloads[0]
    half = 1 << (ceil_log2(n) - 1)
    lo_any, lo_idx, lo_pay = _priority(flags[:half], payloads[:half])
    hi_any, hi_idx, hi_pay = _priority(flags[half:], payloads[half:])
    pad = Const(0, ceil_log2(half) - len(hi_idx))
    return (lo_any | hi_any,
            Mux(lo_any, lo_idx, Cat(hi_idx, pad, Const(1, 1))),
            Mux(lo_any, lo_pay, hi_pay))


def _one_hot(m, domain, target, sel, n):
    """``target`` (``n`` bits) gets the one-hot code of ``sel`` in ``domain``, through a
    ``Switch`` (its Verilog lints clean, unlike a comparison with a narrow constant)."""
    if n == 1:
        m.d[domain] += target.eq(1)
        return
    with m.Switch(sel):
        for i in range(n):
            with m.Case(i):
                m.d[domain] += target.eq(1 << i)


class PopularityCAM(wiring.Component):
    """Popularity CAM: ``lanes`` lookups key -> (hit, slot) per cycle, at a fixed latency.

    Two kinds, chosen by ``cfg.cam_kind``:

    * ``"full"``: fully associative. Every slot is a register pair (valid, key); every lane
      compares its key with every slot. A key held by several slots (possible through host
      writes) returns the lowest slot. About 40 LUT4 per entry per lane on ECP5: keep it for
      tens to a few hundred entries.
    * ``"hash"``: set-associative in block RAM (:class:`amaranth.lib.memory.Memory`),
      ``cam_sets`` sets of ``cam_ways`` ways. The set of a key is
      ``h3(key, SEED_CAM, key_bits, cam_set_bits)``; one memory word holds a whole set
      (``cam_ways`` x (valid bit + key)); ``slot = set * cam_ways + way``; the lowest matching
      way wins. A host write names a slot, which must lie in the key's set.

    Lookups never stall (initiation interval 1, no ready). Host writes, host reads and the
    clear sweep use the lookup path's memory port only in cycles no lookup needs it.

    Memory replication (``hash``)
    -----------------------------
    One copy of the set memory per **pair of lanes** (``max(1, lanes // 2)`` copies), each with
    two read ports (lanes ``2p`` and ``2p + 1``) and one write port, so a copy maps to a
    true-dual-port block RAM (ECP5 DP16KD, Xilinx RAMB36, Intel M20K) with the write merged
    into port A: the write port shares port A's address signal (a mux between lane ``2p``'s set
    index and the host/sweep address), which lets Yosys fold them into one read/write port.
    Writes go to every copy at once. Cost: ``max(1, lanes // 2) * cam_entries *
    (key_bits + 1)`` bits of block RAM, half of what a copy per lane would need (the DESIGN.md
    appendix measured one copy per pair as also the faster choice). On ECP5 a true-dual-port
    DP16KD is at most 18 bits wide and a way needs its own write enable, so each way takes
    ``ceil((key_bits + 1) / 18)`` columns of 512 sets: the ``ulx3s`` preset (4096 entries,
    8 ways, 29-bit keys, 4 lanes) maps to 2 copies x 16 = 32 DP16KD (Yosys ``synth_ecp5``;
    a read-modify-write of whole words would need 14 per copy). Port A is also where host
    writes and reads happen; they wait for a cycle in which no lookup is at the address
    stage, so a continuous lookup stream holds them off (the protocol installs while the
    lookup stream is idle). A write never coincides with a lookup read on port B of the same
    copy either (the free-port test covers every lane), so the undefined same-address
    read-during-write of a true-dual-port RAM never reaches a result.

    The write uses per-way write enables (``granularity=1`` element of the word), so it is a
    single write cycle, not a read-modify-write of the set word.

    Latency
    -------
    ``LATENCY`` cycles from a lookup to its result, the same for every lane and every beat:

    * ``full``: **4**. (1) input register; (2) compare with every slot, one match bit per slot
      registered; (3) priority encode within groups of 16 slots, registered; (4) priority
      encode across groups into the output registers.
    * ``hash``: **7**. (1) input register; (2) H3 hash, registered: it is the memory address;
      (3) block RAM read (synchronous read port); (4) register after the RAM data (the stage
      that an ECP5 DP16KD's own output register takes in a vendor implementation, so
      ``LATENCY`` does not change with the memory implementation); (5) fabric register; (6)
      compare every way, match bits registered; (7) priority encode into the output registers.

    The write and read ports are elastic (stream handshakes); their latency is not fixed:

    * Host requests are performed one per cycle at most, in handshake order (so a read sees
      every earlier write). Request ``j``, accepted in cycle ``a``, is performed in the first
      cycle ``x >= max(a + 2, x[j - 1] + 1)`` in which the shared port is free: always for
      ``full``; for ``hash``, when no valid lookup was presented in cycle ``x - 2`` (none is
      at the address stage). A rejected write is performed too (it only counts).
    * A write takes effect at one point of the lookup stream: lookups presented before cycle
      ``x`` (``full``) or ``x - 1`` (``hash``) see the old entry, later ones the new. With the
      lookup stream idle and no request waiting, lookups presented 2 or more cycles after the
      handshake see the write.
    * A read's ``read_resp`` is valid 1 (``full``) or 4 (``hash``) cycles after ``x``; one
      read is in flight at a time, and a read is not performed while ``read_resp`` holds an
      earlier response.

    Parameters
    ----------
    cfg : :class:`hotline_hw.config.HotlineConfig`
        Uses ``lanes``, ``key_bits``, ``cam_kind``, ``cam_entries``, ``cam_ways`` and the
        derived ``cam_sets``, ``cam_set_bits``, ``slot_bits``; the configuration has already
        validated them.
    memory_kind : :class:`str` or :py:`None`
        Keyword-only hook for a vendor block RAM implementation of the ``hash`` kind (e.g. an
        instantiated ECP5 DP16KD with its output register on). Only :py:`None`, the generic
        :mod:`amaranth.lib.memory` path, exists yet.

    Attributes
    ----------
    LATENCY : :class:`int`
        Cycles from a lookup to its result (4 for ``full``, 7 for ``hash``).
    cfg : :class:`hotline_hw.config.HotlineConfig`
        The configuration.

    Raises
    ------
    :exc:`ValueError`
        If ``memory_kind`` is not :py:`None`.

    Members
    -------
    lookup_valid : ``In(lanes)``
        Bit ``i`` set: lane ``i`` carries a lookup this cycle. There is no ready: a beat is
        taken every cycle.
    lookup_keys : ``In(data.ArrayLayout(key_bits, lanes))``
        The key of each lane.
    result_valid : ``Out(lanes)``
        ``lookup_valid`` delayed by ``LATENCY`` cycles.
    result_hit : ``Out(lanes)``
        Lane ``i``'s key was in the CAM (0 on an invalid lane).
    result_slot : ``Out(data.ArrayLayout(slot_bits, lanes))``
        The slot holding the key (the lowest one if several do); 0 on a miss or an invalid
        lane.
    write : ``In(stream.Signature(data.StructLayout({...})))``
        Payload fields ``slot`` (``slot_bits``), ``key`` (``key_bits``), ``used`` (1).
        Host write of one entry: ``used=1`` stores ``key`` in ``slot``, ``used=0`` erases
        ``slot`` (its key reads back as 0). A ``hash`` CAM rejects a write with ``used=1``
        whose slot is not in the key's set (``slot // cam_ways != h3 set of key``): nothing
        changes and ``write_rejected`` counts it, as :meth:`golden.cam.Cam.write` returns
        :py:`False`. ``slot_bits`` fits ``cam_entries`` exactly, so no slot is out of range
        (except slot 1 of a one-entry ``full`` CAM, which is rejected and counted too).
        ``ready`` is low in the cycle ``clear`` is high, while ``busy``, and while the two
        request registers are full (a request waits there for the shared port). When
        ``write`` and ``read_req`` are both valid, the write goes first.
    write_rejected : ``Out(32)``
        Count of rejected writes (wraps; reset by the domain reset, not by ``clear``).
    read_req : ``In(stream.Signature(slot_bits))``
        Host read-back of one slot (register read-back, tests, eviction). Same ``ready`` rules
        as ``write``.
    read_resp : ``Out(stream.Signature(data.StructLayout({...})))``
        Payload fields ``key`` (``key_bits``), ``used`` (1).
        The entry of the requested slot, in request order; ``key`` is 0 when ``used`` is 0.
        (The field is ``used``, not ``valid``, so that exported port names do not collide
        with the stream's own ``valid``.)
        Held until taken (``ready``); the next read waits for it.
    clear : ``In(1)``
        A one-cycle pulse: erase every entry. Ignored while ``busy`` (the running sweep already
        erases everything and nothing can write meanwhile).
    busy : ``Out(1)``
        High while a clear sweep runs, from the cycle after ``clear``: one cycle for ``full``,
        ``cam_sets`` cycles for ``hash`` (one set per cycle), plus at most 2 cycles before
        the sweep starts: it first lets host requests accepted before the clear finish, and
        waits for the lookups already in flight to pass the memory port. (A read accepted
        before the clear waits for ``read_resp`` to be free, so an untaken response delays
        the sweep.) Lookups presented in the ``clear`` cycle or while
        ``busy`` return a miss (``result_valid`` still mirrors them); lookups presented
        before see the old contents, lookups presented after ``busy`` falls see the empty CAM.
        ``busy`` is also high after reset: block RAM keeps its contents through a reset, so
        the CAM erases itself and is empty after any reset, whatever the kind.
    """

    LATENCY_FULL = 4
    LATENCY_HASH = 7
    _GROUP = 16  # slots per first-level priority encoder of a full CAM

    def __init__(self, cfg, *, memory_kind=None):
        if memory_kind is not None:
            raise ValueError(f"memory_kind={memory_kind!r}: only None (the generic "
                             f"amaranth.lib.memory path) is implemented")
        self.cfg = cfg
        self.memory_kind = memory_kind
        self.LATENCY = self.LATENCY_FULL if cfg.cam_kind == "full" else self.LATENCY_HASH
        lanes, kb, sb = cfg.lanes, cfg.key_bits, cfg.slot_bits
        super().__init__({
            "lookup_valid": In(lanes),
            "lookup_keys": In(data.ArrayLayout(kb, lanes)),
            "result_valid": Out(lanes),
            "result_hit": Out(lanes),
            "result_slot": Out(data.ArrayLayout(sb, lanes)),
            "write": In(stream.Signature(data.StructLayout(
                {"slot": sb, "key": kb, "used": 1}))),
            "write_rejected": Out(32),
            "read_req": In(stream.Signature(sb)),
            "read_resp": Out(stream.Signature(data.StructLayout({"key": kb, "used": 1}))),
            "clear": In(1),
            "busy": Out(1),
        })

    # ------------------------------------------------------------------------------------
    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        lanes, kb, sb = cfg.lanes, cfg.key_bits, cfg.slot_bits
        is_hash = cfg.cam_kind == "hash"
        way_bits = ceil_log2(cfg.cam_ways) if is_hash else 0

        # --- clear sweep ----------------------------------------------------------------
        busy = Signal(init=1)                      # also set by reset: see the docstring
        if cfg.cam_set_bits:
            sweep_idx = Signal(cfg.cam_set_bits)   # the set being erased
            sweep_last = sweep_idx == cfg.cam_sets - 1
        else:                                      # a full CAM: one sweep cycle
            sweep_idx, sweep_last = Const(0, 0), Const(1)
        m.d.comb += self.busy.eq(busy)
        kill = self.clear | busy                   # lookups presented now return a miss

        # --- lookup front: input register ------------------------------------------------
        s1_valid = Signal(lanes)
        s1_live = Signal(lanes)                    # valid and not killed by clear/busy
        s1_key = Signal(data.ArrayLayout(kb, lanes))
        m.d.sync += [
            s1_valid.eq(self.lookup_valid),
            s1_live.eq(Mux(kill, 0, self.lookup_valid)),
            s1_key.eq(self.lookup_keys),
        ]

        # --- host requests: H1 (accepted) -> H2 (waits for the port, then performed) -----
        h1_full = Signal()
        h1_read = Signal()
        h1_slot = Signal(sb)
        h1_key = Signal(kb)
        h1_ev = Signal()                           # the entry's valid bit (0: erase)
        h2_full = Signal()
        h2_read = Signal()
        h2_slot = Signal(sb)
        h2_entry = Signal(data.StructLayout({"valid": 1, "key": kb}))
        h2_reject = Signal()                       # the write is rejected
        port_free = Signal()                       # no lookup needs the shared port
        read_free = Signal()                       # a read may be performed
        h2_fire = Signal()
        h1_move = Signal()

        m.d.comb += [
            h2_fire.eq(h2_full & port_free & (~h2_read | read_free)),
            h1_move.eq(h1_full & (~h2_full | h2_fire)),
            self.write.ready.eq(~self.clear & ~busy & (~h1_full | h1_move)),
            self.read_req.ready.eq(self.write.ready & ~self.write.valid),
        ]
        with m.If(self.write.valid & self.write.ready):
            m.d.sync += [
                h1_full.eq(1), h1_read.eq(0), h1_slot.eq(self.write.payload.slot),
                h1_key.eq(self.write.payload.key), h1_ev.eq(self.write.payload.used),
            ]
        with m.Elif(self.read_req.valid & self.read_req.ready):
            m.d.sync += [h1_full.eq(1), h1_read.eq(1), h1_slot.eq(self.read_req.payload)]
        with m.Elif(h1_move):
            m.d.sync += h1_full.eq(0)

        if (1 << sb) > cfg.cam_entries:            # only a one-entry full CAM
            out_of_range = h1_slot >= cfg.cam_entries
        else:
            out_of_range = Const(0)
        if is_hash:
            wrong_set = h3_expr(h1_key, SEED_CAM, kb, cfg.cam_set_bits) != h1_slot[way_bits:]
            reject = out_of_range | (h1_ev & wrong_set)
        else:
            reject = out_of_range
        with m.If(h1_move):
            m.d.sync += [
                h2_full.eq(1), h2_read.eq(h1_read), h2_slot.eq(h1_slot),
                h2_entry.valid.eq(h1_ev), h2_entry.key.eq(Mux(h1_ev, h1_key, 0)),
                h2_reject.eq(reject),
            ]
        with m.Elif(h2_fire):
            m.d.sync += h2_full.eq(0)

        write_fire = h2_fire & ~h2_read & ~h2_reject
        read_fire = h2_fire & h2_read
        with m.If(h2_fire & ~h2_read & h2_reject):
            m.d.sync += self.write_rejected.eq(self.write_rejected + 1)

        # the sweep runs after the host requests accepted before the clear
        sweep_go = Signal()
        m.d.comb += sweep_go.eq(busy & port_free & ~h1_full & ~h2_full)
        with m.If(~busy & self.clear):
            m.d.sync += busy.eq(1)                 # sweep_idx is 0 between sweeps
        with m.If(sweep_go):
            if cfg.cam_set_bits:
                m.d.sync += sweep_idx.eq(sweep_idx + 1)    # wraps to 0 after the last set
            with m.If(sweep_last):
                m.d.sync += busy.eq(0)

        # --- read response buffer -------------------------------------------------------
        resp_valid = Signal()
        resp = Signal(self.read_resp.payload.shape())
        m.d.comb += [self.read_resp.valid.eq(resp_valid), self.read_resp.payload.eq(resp)]
        with m.If(self.read_resp.valid & self.read_resp.ready):
            m.d.sync += resp_valid.eq(0)

        # the kind-specific part drives port_free and read_free, performs write_fire,
        # read_fire and sweep_go, and computes the results
        shared = SimpleNamespace(
            s1_valid=s1_valid, s1_live=s1_live, s1_key=s1_key,
            h2_slot=h2_slot, h2_entry=h2_entry, h2_fire=h2_fire,
            write_fire=write_fire, read_fire=read_fire,
            sweep_go=sweep_go, sweep_idx=sweep_idx,
            port_free=port_free, read_free=read_free, resp=resp, resp_valid=resp_valid)
        if is_hash:
            self._elaborate_hash(m, shared)
        else:
            self._elaborate_full(m, shared)
        return m

    # ------------------------------------------------------------------------------------
    def _elaborate_full(self, m, c):
        cfg = self.cfg
        n, lanes, kb = cfg.cam_entries, cfg.lanes, cfg.key_bits
        ent_valid = Signal(n)
        # keys need no reset: a key is only seen through its valid bit
        ent_key = [Signal(kb, name=f"ent_key{e}", reset_less=True) for e in range(n)]

        # registers have no shared port; a read is performed when the buffer is free
        m.d.comb += [c.port_free.eq(1), c.read_free.eq(~c.resp_valid)]

        with m.If(c.sweep_go):
            m.d.sync += ent_valid.eq(0)
        with m.If(c.write_fire):
            with m.Switch(c.h2_slot):
                for e in range(n):
                    with m.Case(e):
                        m.d.sync += [ent_valid[e].eq(c.h2_entry.valid),
                                     ent_key[e].eq(c.h2_entry.key)]
        with m.If(c.read_fire):
            m.d.sync += [c.resp_valid.eq(1), c.resp.eq(0)]     # (0, 0) for an out-of-range slot
            with m.Switch(c.h2_slot):
                for e in range(n):
                    with m.Case(e):
                        m.d.sync += [c.resp.used.eq(ent_valid[e]),
                                     c.resp.key.eq(Mux(ent_valid[e], ent_key[e], 0))]

        group = min(self._GROUP, n)
        groups = n // group
        s2_valid = Signal(lanes)
        s3_valid = Signal(lanes)
        m.d.sync += [s2_valid.eq(c.s1_valid), s3_valid.eq(s2_valid),
                     self.result_valid.eq(s3_valid)]
        for lane in range(lanes):
            # (2) compare
            s2_match = Signal(n, name=f"s2_match{lane}")
            m.d.sync += s2_match.eq(Cat(
                ent_valid[e] & (ent_key[e] == c.s1_key[lane]) & c.s1_live[lane] for e in range(n)))
            # (3) first-level priority encoders, one per group of slots
            s3_any = Signal(groups, name=f"s3_any{lane}")
            s3_idx = [Signal(ceil_log2(group), name=f"s3_idx{lane}_{g}") if group > 1
                      else Const(0, 0) for g in range(groups)]
            for g in range(groups):
                any_, idx, _ = _priority([s2_match[g * group + i] for i in range(group)])
                m.d.sync += s3_any[g].eq(any_)
                if group > 1:
                    m.d.sync += s3_idx[g].eq(idx)
            # (4) across groups, into the output registers
            any_, g_idx, in_idx = _priority([s3_any[g] for g in range(groups)], s3_idx)
            m.d.sync += [
                self.result_hit[lane].eq(any_),
                self.result_slot[lane].eq(Mux(any_, Cat(in_idx, g_idx), 0)),
            ]

    # ------------------------------------------------------------------------------------
    def _elaborate_hash(self, m, c):
        cfg = self.cfg
        way_bits = ceil_log2(cfg.cam_ways)
        lanes, kb, ways, set_bits = cfg.lanes, cfg.key_bits, cfg.cam_ways, cfg.cam_set_bits
        entry_layout = data.StructLayout({"valid": 1, "key": kb})
        word_layout = data.ArrayLayout(entry_layout, ways)

        def pipe(name, src, shape, *, reset_less=False):
            """A register of ``src``, one cycle later. ``reset_less``: no reset,
            for values that only matter while the stage's ``live`` / ``valid`` bits (which
            reset) say so: the sets, keys and memory words (2.7k flip-flops on ``ulx3s``)
            then stay off the reset net."""
            r = Signal(shape, name=name, reset_less=reset_less)
            m.d.sync += r.eq(src)
            return r

        # (2) hash: the registered set index is the memory address
        s2_set = [pipe(f"s2_set{i}", h3_expr(c.s1_key[i], SEED_CAM, kb, set_bits), set_bits,
                       reset_less=True) for i in range(lanes)]
        s2_key = pipe("s2_key", c.s1_key, c.s1_key.shape(), reset_less=True)
        s2_valid = pipe("s2_valid", c.s1_valid, lanes)
        s2_live = pipe("s2_live", c.s1_live, lanes)

        # the shared port is free when no live lookup is at the address stage (any lane:
        # port B of a copy is then idle too, so no read meets a write on the same address)
        m.d.comb += c.port_free.eq(~s2_live.any())
        host_use = c.h2_fire | c.sweep_go
        host_addr = Mux(c.sweep_go, c.sweep_idx, c.h2_slot[way_bits:])
        wr_en = Signal(ways)
        wr_entry = Signal(entry_layout)
        with m.If(c.sweep_go):
            m.d.comb += wr_en.eq(-1)               # all ways, entry 0: erase the set
        with m.Elif(c.write_fire):
            _one_hot(m, "comb", wr_en, c.h2_slot[:way_bits], ways)
            m.d.comb += wr_entry.eq(c.h2_entry)

        # (3) block RAM: one copy per pair of lanes; port A shared with the host and sweep
        rd_data = []
        for p in range(max(1, lanes // 2)):
            mem = Memory(shape=word_layout, depth=cfg.cam_sets, init=[])
            m.submodules[f"mem{p}"] = mem
            wr = mem.write_port(granularity=1)
            rd_a = mem.read_port()
            addr_a = Signal(set_bits, name=f"addr_a{p}")
            m.d.comb += [
                addr_a.eq(Mux(host_use, host_addr, s2_set[2 * p])),
                rd_a.addr.eq(addr_a),
                wr.addr.eq(addr_a),
                wr.en.eq(wr_en),
            ]
            m.d.comb += [wr.data[w].eq(wr_entry) for w in range(ways)]
            rd_data.append(rd_a.data)
            if lanes > 1:
                rd_b = mem.read_port()
                m.d.comb += rd_b.addr.eq(s2_set[2 * p + 1])
                rd_data.append(rd_b.data)

        s3_set = [pipe(f"s3_set{i}", s2_set[i], set_bits, reset_less=True)
                  for i in range(lanes)]
        s3_key = pipe("s3_key", s2_key, s2_key.shape(), reset_less=True)
        s3_valid = pipe("s3_valid", s2_valid, lanes)
        s3_live = pipe("s3_live", s2_live, lanes)
        # (4) register after the RAM data; (5) fabric register
        s4_word = [pipe(f"s4_word{i}", rd_data[i], word_layout, reset_less=True)
                   for i in range(lanes)]
        s4_set = [pipe(f"s4_set{i}", s3_set[i], set_bits, reset_less=True)
                  for i in range(lanes)]
        s4_key = pipe("s4_key", s3_key, s3_key.shape(), reset_less=True)
        s4_valid = pipe("s4_valid", s3_valid, lanes)
        s4_live = pipe("s4_live", s3_live, lanes)
        s5_word = [pipe(f"s5_word{i}", s4_word[i], word_layout, reset_less=True)
                   for i in range(lanes)]
        s5_set = [pipe(f"s5_set{i}", s4_set[i], set_bits, reset_less=True)
                  for i in range(lanes)]
        s5_key = pipe("s5_key", s4_key, s4_key.shape(), reset_less=True)
        s5_valid = pipe("s5_valid", s4_valid, lanes)
        s5_live = pipe("s5_live", s4_live, lanes)
        # (6) compare every way
        s6_match = [pipe(f"s6_match{i}", Cat(
                        s5_word[i][w].valid & (s5_word[i][w].key == s5_key[i]) & s5_live[i]
                        for w in range(ways)), ways)
                    for i in range(lanes)]
        s6_set = [pipe(f"s6_set{i}", s5_set[i], set_bits, reset_less=True)
                  for i in range(lanes)]
        s6_valid = pipe("s6_valid", s5_valid, lanes)
        # (7) priority encode into the output registers
        m.d.sync += self.result_valid.eq(s6_valid)
        for i in range(lanes):
            any_, way, _ = _priority([s6_match[i][w] for w in range(ways)])
            m.d.sync += [
                self.result_hit[i].eq(any_),
                self.result_slot[i].eq(Mux(any_, Cat(way, s6_set[i]), 0)),
            ]

        # host read: port A of copy 0 is lane 0's port; the word follows lane 0's data
        # registers (s4, s5), as a lookup's does, and is taken from s5 three cycles later
        rd_inflight = Signal(3)                    # a read 1, 2, 3 cycles after it fired
        rd_way = Signal(ways)                      # one-hot
        m.d.sync += rd_inflight.eq(Cat(c.read_fire, rd_inflight[:2]))
        with m.If(c.read_fire):
            _one_hot(m, "sync", rd_way, c.h2_slot[:way_bits], ways)
        m.d.comb += c.read_free.eq(~c.resp_valid & ~rd_inflight.any())
        with m.If(rd_inflight[2]):
            m.d.sync += [c.resp_valid.eq(1), c.resp.eq(0)]
            for w in range(ways):
                entry = s5_word[0][w]
                with m.If(rd_way[w] & entry.valid):
                    m.d.sync += [c.resp.used.eq(1), c.resp.key.eq(entry.key)]
