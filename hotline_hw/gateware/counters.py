"""The access-frequency counter array in gateware: :class:`AccessCounterArray`.

``counter_sets x counter_ways`` tagged saturating counters in block RAM, updated by a
pipelined read-modify-write with forwarding, ``counter_banks`` lookups per cycle. The rules
are those of the golden model, :class:`golden.counters.CounterArray`, bit for bit:

* **hit** (the key is in a valid way of its set): ``count = min(count + 1, counter_max)``;
* **miss, the set has an invalid way**: the lowest invalid way gets ``(key, 1)``;
* **miss, the set is full**: the way with the smallest count (lowest way on ties) gets
  ``(key, min(smallest + 1, counter_max))``.

The set of a key is ``h3(key, SEED_COUNTER)`` over ``log2(counter_sets)`` bits; its bank is
``set % counter_banks`` and its row in that bank's memory ``set // counter_banks``. One
memory word holds a whole set: ``counter_ways`` entries of ``(valid, key, count)``, way 0 in
the low bits (the layout of :attr:`AccessCounterArray.set_layout`).
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2, exact_log2

from ..config import HotlineConfig
from ..hashing import SEED_COUNTER
from .bits import popcount
from .hash import h3_expr
from .memories import COLLISION_ATTR

__all__ = ["AccessCounterArray", "READ_LATENCY", "READ_QUEUE_DEPTH"]

#: Cycles from a read request's acceptance to its response (at the earliest).
READ_LATENCY = 5
#: Read requests the array accepts before the first response is taken (the responses wait in
#: a queue of this depth; one more than the read latency, so that an always-ready consumer
#: gets one set per cycle).
READ_QUEUE_DEPTH = READ_LATENCY + 1

# Operations flowing down a bank's pipeline.
_OP_LOOKUP = 0   # read-modify-write of one lookup
_OP_AGE = 1      # halve every count of the row (aging sweep)
_OP_CLEAR = 2    # invalidate every entry of the row (clear sweep)
_OP_READ = 3     # read the row for read_resp (no write)


def entry_layout(cfg):
    """Layout of one counter: ``valid``, ``key``, ``count``."""
    return data.StructLayout({"valid": 1, "key": cfg.key_bits, "count": cfg.counter_bits})


def set_layout(cfg):
    """Layout of one set (one memory word, one ``read_resp`` payload): way 0 first."""
    return data.ArrayLayout(entry_layout(cfg), cfg.counter_ways)


def lookup_layout(cfg):
    """Payload of the ``lookups`` stream."""
    return data.StructLayout({
        "keys": data.ArrayLayout(cfg.key_bits, cfg.lanes),
        "keep": cfg.lanes,
        "last": 1,
    })


class AccessCounterArray(wiring.Component):
    """Access-frequency counter array: learns which rows are popular.

    Lookups arrive on :attr:`lookups`, up to ``lanes`` keys per beat. A lookup is *applied*
    (updates its set, see the module docstring) when its ``keep`` bit is set, its key is good
    (``key >> row_bits < num_tables``; bad keys are accepted and ignored) and its mini-batch is
    sampled. Mini-batch ``n`` of a learning phase (every mini-batch counts, sampled or not,
    from 0 after :attr:`start`) is sampled iff ``n % learn_period == 0``. With
    ``cfg.aging_period > 0``, every count is halved after the last lookup of every
    ``aging_period``-th sampled mini-batch has been applied (entries stay valid).

    Parameters
    ----------
    cfg : HotlineConfig
        Uses ``lanes``, ``table_bits``, ``row_bits``, ``num_tables``, ``counter_sets``,
        ``counter_ways``, ``counter_bits``, ``counter_banks`` and ``aging_period``.
    window : int
        Beats the dispatcher holds at once (1..4, default 2). With 1 a beat must be fully
        dispatched before the next is accepted; with 2 the lanes of the next beat may use the
        banks the current one leaves free (see *Banking and stalls*).

    Raises
    ------
    TypeError
        If ``cfg`` is not a :class:`HotlineConfig`.
    ValueError
        If ``window`` is not an integer in 1..4.

    Members
    -------
    lookups : In(stream.Signature(StructLayout({"keys": ArrayLayout(key_bits, lanes), \
"keep": lanes, "last": 1})))
        The lookup stream. ``keep`` bit ``i`` marks ``keys[i]`` valid; lane 0 is first in
        stream order. ``last`` marks the last beat of a mini-batch (a beat with ``keep == 0``
        and ``last == 1`` is allowed and ends a mini-batch). ``ready`` never depends on
        ``valid``; it depends on ``start`` and on registered state.
    learn_period : In(16)
        The LEARN_PERIOD register: sample every ``learn_period``-th mini-batch (0 acts as 1).
        A phase counter implements ``n % learn_period``: it counts mini-batches and wraps to
        0 when it reaches ``learn_period``, so hold the value constant during a learning
        phase (a change takes effect at the next wrap of the phase counter at the latest).
    start : In(1)
        Pulse: start a learning phase. Clears the array (a sweep), the mini-batch phase, the
        aging count and the statistics. Lookups still in the dispatch window are dropped;
        lookups already dispatched are applied before the clear and so erased.
        ``lookups.ready`` is low in the cycle of the pulse.
    busy : Out(1)
        A clear or aging sweep is pending or running: high from the cycle after ``start``,
        or after the beat that triggers aging was accepted (while the window drains), until
        the cycle that issues the last row.
    idle : Out(1)
        Nothing in flight: the dispatch window is empty, no sweep is pending or running, no
        operation is in the bank pipelines (responses waiting in the read queue do not
        count). Once ``idle`` is high, every accepted lookup has been written to the array.
    sampled : Out(32)
        Sampled mini-batches since ``start`` (counted when their ``last`` beat is accepted).
    learned : Out(32)
        Lookups applied since ``start`` (bad keys and lookups of unsampled mini-batches
        excluded; the golden ``BatchCounters.learned_lookups``), counted in the cycle after
        they are accepted.
    minibatches : Out(32)
        Mini-batches since ``start`` (beats with ``last`` accepted).
    read_req : In(stream.Signature(max(1, counter_set_bits)))
        Read the set with this index (bits above ``counter_set_bits`` are ignored).
    read_resp : Out(stream.Signature(ArrayLayout(StructLayout({"valid": 1, "key": key_bits, \
"count": counter_bits}), counter_ways)))
        The set, way 0 first, in request order. Invalid entries read as all zeros after a
        clear.

    Pipeline
    --------
    Each bank has one simple dual-port memory (one synchronous, non-transparent read port and
    one write port) and a five-stage pipeline that never stalls:

    * **S0 dispatch**: the *window* holds up to ``window`` accepted beats with their keys,
      rows and one-hot banks (the H3 hash is computed on the input and registered with the
      beat) and the mask of lanes not yet dispatched. A beat is loaded into a free slot and
      stays there until its last lane is dispatched (its key / row / bank registers are only
      written on a load, so they need no multiplexers); a small matrix of registers
      (``slot_older``) records which slot holds the older beat. Each bank takes the first
      pending lookup *in stream order* that maps to it (oldest beat first, then lowest lane:
      the lane requests the bank, no lower lane of its beat does, no older beat does),
      and registers its op (row) and the one-hot grant (``sr_grant``). A sweep or a read
      takes S0 instead when the window is empty.
    * **SR read**: the registered op's row drives the memory's read port (the address and
      enable are flip-flops: the dispatch logic does not reach the nets that spread over a
      bank's block RAMs). The lookup's key is selected from the grant and a copy of the last
      cycle's window keys (``prev_keys``), all registers, and registered for S1.
    * **S1**: the memory word arrives. S1 compares its
      row with those of the three newer writes it may have missed: the op in S2 (whose data
      S3 writes in S2's cycle: ``s3_new``), the op in S3 (its data is ``s3_new`` now and in
      ``lw`` in S2's cycle) and the write in ``lw`` (it happened at the clock edge of our
      read, when a non-transparent read returns the old word, and FPGA block RAM an
      undefined one). It registers the newest of the memory word and the last two
      (``s2_pre``: a multiplexer whose selects are compares of registers) and whether S2
      must take ``s3_new`` instead (``s2_f1``). It also makes S2's key compares: which
      ways of ``s2_pre`` hold the lookup's key (``s2_pre_hit``), whether the key is that of
      the op now in S2 (``s2_key_is_s3``) and which ways of that op's operand hold it
      (``s2_old_eq``), so that S2 only selects them.
    * **S2 decide**: the operand is ``s3_new`` if ``s2_f1``, else ``s2_pre``: one LUT4 per
      bit (``s3_new`` is itself a 2-input multiplexer of S3's registers), so that the S3 ->
      S2 -> S3 loop holds as little logic as possible. S2 decides which ways a lookup writes
      (the hitting way, else the victim, found by comparing all pairs of ways in parallel),
      and registers with the operand (``s3_old``): the ways whose valid bit and key S3 replaces
      (``s3_tag_take``: the selected way of a lookup, every way of a clear), the ways whose
      count it replaces (``s3_cnt_take``: also every way of an aging row), the new counts
      (``s3_cnt``: the saturating increment, or 1 for an invalid way; the halved count; 0)
      and the new valid bit (``s3_flag``). A read takes its response here.
    * **S3 write**: the new set (``s3_new``) is one 2-input multiplexer per bit of S3's
      registers (a sweep op's key is 0, so a clear writes all zeros). It is written at the
      end of the cycle and kept in ``lw``.

    So a lookup to the same set one, two or three cycles later takes the newer data (in S2
    from ``s3_new``, in S1 from ``s3_new`` or ``lw``), and one four or more cycles later
    reads it from memory: back-to-back lookups of one set never stall and always see every
    earlier update. Sweeps and reads go down the same pipeline in order, so they are
    forwarded the same way. The only loop is S3 -> S2 -> S3: ``s3_*`` registers -> ``s3_new``
    multiplexers -> 2:1 operand mux (one LUT4 with the ``s3_new`` mux) -> pairwise count
    compare -> ``s3_tag_take``; no adder and no key comparator lies on it (the counts are
    computed by S2 for S3, S3's output needs none, and the hits are compares S1 registered:
    the key compare ahead of the hit / victim choice was the ``ulx3s`` route's slowest path
    in the array).

    Area: every wide multiplexer (S1's 3:1 and S2's 2:1 operand mux, S3's per-bit mux, the
    SR key select, the read response) has register selects. A select computed by a few
    levels of logic in the same cycle makes the LUT mapper copy that logic into every bit of
    a 168-bit word (``ulx3s``: 13.0k LUT4 for the array before, 8.1k after, Yosys 0.23
    ``synth_ecp5 -noflatten``).

    Banking and stalls
    ------------------
    Each cycle every bank dispatches one lookup, the first pending one in stream order that
    maps to it: lanes of one beat in different banks go in the same cycle, lanes in the same
    bank one per cycle in lane order, and the lanes of a newer beat in the window only use
    banks no older pending lookup needs. Per bank, hence per set, lookups reach the memory in
    stream order; lookups of different sets commute, so the final state equals the golden
    model's. A beat is accepted (``lookups.ready`` high) in any cycle that ends with fewer
    than ``window`` beats holding undispatched lookups, so ``ready`` is low while the window
    is full of beats waiting for busy banks. With no bank conflict (at most one valid lane per
    bank in a beat) the input takes one beat per cycle. Random keys, full beats, measured:
    4 lanes / 4 banks 1.8 lookups per cycle with ``window=1``, 2.6 with ``window=2``.

    Latency
    -------
    * Lookup: accepted at cycle ``t``; dispatched at ``t + 1 + j`` where ``j`` is the number
      of cycles its bank spends on earlier lookups of the window (0 without a conflict);
      written to the array at the end of cycle ``t + 6 + j``. With the last lookup
      dispatched at ``t + 1``, ``idle`` rises at ``t + 7``.
    * Read: ``read_req`` accepted at cycle ``t`` gives ``read_resp.valid`` at ``t + 5``
      (:data:`READ_LATENCY`) at the earliest; up to :data:`READ_QUEUE_DEPTH` reads are outstanding, so an always-ready
      consumer gets one set per cycle. A read is accepted in a cycle when S0 is free: the
      dispatch window is empty and no sweep is pending (lookups have priority). It then
      enters the pipeline behind every lookup accepted before it, so it returns the set as
      updated by exactly those lookups. (The install engine reads after learning stops,
      when the array is ``idle``.)

    Clear and aging cost
    --------------------
    All banks sweep in parallel, one row per cycle: a sweep issues ``R = counter_sets /
    counter_banks`` operations per bank in ``R`` cycles.

    * Clear: ``start`` at cycle ``t``; rows issued at ``t + 1 .. t + R``; ``busy`` is high
      for those ``R`` cycles; ``lookups.ready`` rises again at ``t + R`` (new lookups follow
      the last clear row down the pipeline). The array is completely clear at the end of
      cycle ``t + R + 3``.
    * Aging: when the ``last`` beat of an aging mini-batch is accepted, the input stalls
      while the window drains, then during the ``R`` sweep cycles (``lookups.ready`` rises in
      the cycle of the last row). When the window drains in one cycle (no bank conflict),
      aging costs exactly ``R`` cycles of input stall per ``aging_period`` sampled
      mini-batches.
    """

    def __init__(self, cfg, *, window=2):
        if not isinstance(cfg, HotlineConfig):
            self._MustUse__silence = True   # never built: no "created but never used" warning
            raise TypeError(f"AccessCounterArray: cfg must be a HotlineConfig, not {cfg!r}")
        if not isinstance(window, int) or isinstance(window, bool) or not 1 <= window <= 4:
            self._MustUse__silence = True
            raise ValueError(f"AccessCounterArray: window must be an integer in 1..4, "
                             f"not {window!r}")
        self._cfg = cfg
        self._window = window
        self._set_layout = set_layout(cfg)
        super().__init__({
            "lookups": In(stream.Signature(lookup_layout(cfg))),
            "learn_period": In(16),
            "start": In(1),
            "busy": Out(1),
            "idle": Out(1),
            "sampled": Out(32),
            "learned": Out(32),
            "minibatches": Out(32),
            "read_req": In(stream.Signature(max(1, cfg.counter_set_bits))),
            "read_resp": Out(stream.Signature(self._set_layout)),
        })

    @property
    def cfg(self):
        return self._cfg

    @property
    def set_layout(self):
        """Layout of a set: ``ArrayLayout(StructLayout({valid, key, count}), counter_ways)``."""
        return self._set_layout

    @property
    def rows(self):
        """Memory words per bank (``counter_sets // counter_banks``)."""
        return self._cfg.counter_sets // self._cfg.counter_banks

    # --- the update of one set, in two halves ---------------------------------------
    def _sat_inc(self, c):
        cmax = self._cfg.counter_max
        return Mux(c == cmax, c, c + 1)

    def _decide(self, m, pre, pre_hit, fwd, fwd_eq, f1, sel, b):
        """S2: drive ``sel`` (comb, one bit per way) with the ways a lookup of ``key`` writes
        in its set: the hitting way(s) on a hit, else the victim (the smallest
        ``(valid, count)``, invalid ways first, the lowest way on ties).

        The set is S1's word ``pre``, or, where ``f1`` (two copies: keys, then valid bits
        and counts) is set, S3's word after its write, given as ``fwd = (flag, tag_take,
        cnt_take, cnt, old)`` (the operands of :meth:`_apply`). Each way's hit and each pair
        compare is made on both words and ``f1`` selects the result (timing: the
        read-modify-write loop S3 -> S2 -> S3, where a lookup follows one of the same row,
        then runs through one compare of S3's registers, not through S3's new word, the
        forwarding multiplexer and then the compare).

        The key compares were made by S1 and registered: ``pre_hit[w]`` (way ``w`` of
        ``pre`` is valid and holds the lookup's key) and ``fwd_eq = (key_is_s3, old_eq)``
        (the lookup's key equals S3's key; equals the key of way ``w`` of ``old``). A hit
        of the forwarded word is that of S3's key or of the old key, chosen by
        ``tag_take``. So S2's loop holds no key comparator, only the count compares.

        The victim is found by comparing every pair of ways in parallel (one comparator
        deep, instead of a tree of compare-and-select levels): way ``w`` is the victim iff
        it is strictly smaller than every lower way and no larger than every higher way.
        """
        cfg = self._cfg
        ways, cbits = cfg.counter_ways, cfg.counter_bits
        flag, tt, tc, cnt, old = fwd
        key_is_s3, old_eq = fwd_eq

        hits = []
        for w in range(ways):
            h = Signal(name=f"s2_hit_b{b}_w{w}")
            hit_fwd = Mux(tt[w], flag & key_is_s3, old[w].valid & old_eq[w])
            m.d.comb += h.eq(Mux(f1[0], hit_fwd, pre_hit[w]))
            hits.append(h)
        hit = Cat(*hits)
        # (valid, count): 0 for an invalid way, whose count is always 0 (ways are only
        # invalidated by a clear, which zeroes them, and a lookup makes a way valid)
        vals = [Cat(pre[w].count, pre[w].valid) for w in range(ways)]
        fvals = [Cat(Mux(tc[w], cnt[w], old[w].count), Mux(tt[w], flag, old[w].valid))
                 for w in range(ways)]
        # lt[(a, c)] for a > c: way a is strictly smaller than the lower way c
        lt = {}
        for a in range(ways):
            for c in range(a):
                x = Signal(name=f"s2_lt_b{b}_{a}_{c}")
                m.d.comb += x.eq(Mux(f1[1], fvals[a] < fvals[c], vals[a] < vals[c]))
                lt[(a, c)] = x
        victim = Signal(ways, name=f"s2_victim_b{b}")
        for w in range(ways):
            conds = [lt[(w, c)] for c in range(w)] + [~lt[(a, w)] for a in range(w + 1, ways)]
            m.d.comb += victim[w].eq(Cat(*conds).all() if conds else 1)
        any_hit = Signal(name=f"s2_any_hit_b{b}")
        m.d.comb += any_hit.eq(hit.any())
        with m.If(any_hit):
            m.d.comb += sel.eq(hit)
        with m.Else():
            m.d.comb += sel.eq(victim)

    def _apply(self, m, flag, key, tag_take, cnt_take, cnt, old, new):
        """S3: drive ``new`` (comb) with the set ``old`` after the operation decided by S2.
        Way ``w`` gets ``(flag, key)`` as its valid bit and key where ``tag_take[w]`` is set
        (a lookup's hitting way or victim: ``(1, lookup key)``; every way of a clear row:
        ``(0, 0)``), and ``cnt[w]`` as its count where ``cnt_take[w]`` is set (S2 computed it:
        the saturating increment or 1, the halved count of an aging row, 0 for a clear).
        Every bit is one 3-input multiplexer of S3's registers."""
        for w in range(self._cfg.counter_ways):
            m.d.comb += [
                new[w].valid.eq(Mux(tag_take[w], flag, old[w].valid)),
                new[w].key.eq(Mux(tag_take[w], key, old[w].key)),
                new[w].count.eq(Mux(cnt_take[w], cnt[w], old[w].count)),
            ]

    def elaborate(self, platform):
        cfg = self._cfg
        m = Module()

        lanes, banks = cfg.lanes, cfg.counter_banks
        set_bits = cfg.counter_set_bits
        bank_bits = exact_log2(banks)
        row_bits = set_bits - bank_bits
        rows = self.rows
        key_bits = cfg.key_bits
        layout = self._set_layout

        op_layout = data.StructLayout({
            "valid": 1, "kind": 2, "key": key_bits, "row": row_bits,
        })

        # --- control state ------------------------------------------------------------
        # The window: beats accepted and not yet fully dispatched. A beat stays in the slot
        # it was loaded into until it is fully dispatched (its key, row and bank registers
        # are only written when a beat is loaded, so they need no multiplexers); the age
        # order of the slots is kept in ``slot_older``.
        depth = self._window
        slot_keys = [Signal(data.ArrayLayout(key_bits, lanes), name=f"slot{j}_keys",
                            reset_less=True) for j in range(depth)]
        slot_rows = [Signal(data.ArrayLayout(row_bits, lanes), name=f"slot{j}_rows",
                            reset_less=True) for j in range(depth)]
        slot_bank = [Signal(data.ArrayLayout(banks, lanes), name=f"slot{j}_bank",
                            reset_less=True) for j in range(depth)]   # one-hot per lane
        slot_mask = [Signal(lanes, name=f"slot{j}_mask")    # lanes still to dispatch
                     for j in range(depth)]
        # slot_older[j][k]: the beat in slot k is older than the one in slot j (meaningful
        # when both slots hold lanes to dispatch)
        slot_older = [Signal(depth, name=f"slot{j}_older") for j in range(depth)]
        # The keys of the last cycle's window, and the lanes each bank took from it: SR
        # selects a lookup's key from registers (S0 only needs the row, for the memory).
        prev_keys = [Signal(data.ArrayLayout(key_bits, lanes), name=f"slot{j}_prev_keys",
                            reset_less=True) for j in range(depth)]
        sr_grant = [Signal(depth * lanes, name=f"sr_grant_b{b}") for b in range(banks)]
        m.d.sync += [prev_keys[j].eq(slot_keys[j]) for j in range(depth)]
        sweep_pending = Signal()
        sweep_kind = Signal(2)
        sweep_row = Signal(range(rows))
        phase = Signal(16)                 # n % learn_period of the current mini-batch
        phase_zero = Signal(init=1)        # phase == 0, kept in a register with phase
        learned_add = Signal(32)           # lookups applied by the beat accepted last cycle
                                           # (32 bits wide for lint; the upper bits are 0)
        outstanding = Signal(range(READ_QUEUE_DEPTH + 1))
        age_count = Signal(range(max(1, cfg.aging_period)))  # sampled mini-batches mod aging_period

        hold_empty = Signal()
        m.d.comb += hold_empty.eq(Cat(*slot_mask) == 0)

        # --- S0: dispatch -------------------------------------------------------------
        # Each bank takes the first pending lookup in stream order (oldest slot, then lowest
        # lane) among those that map to it: a lane is granted if it requests the bank, no
        # lower lane of its slot does and no older slot does. The grants are one-hot.
        s0 = [Signal(op_layout, name=f"s0_b{b}") for b in range(banks)]
        lookup_ops = [Signal(op_layout, name=f"s0_lookup_b{b}") for b in range(banks)]
        issued = [Const(0, lanes) for _ in range(depth)]
        for b in range(banks):
            reqs = []
            any_req = []
            for j in range(depth):
                req = Signal(lanes, name=f"req_b{b}_s{j}")
                m.d.comb += req.eq(slot_mask[j] & Cat(*[slot_bank[j][i][b]
                                                        for i in range(lanes)]))
                reqs.append(req)
                any_req.append(req.any())
            row = Const(0, row_bits)
            grants = []
            for j in range(depth):
                blocked = Signal(name=f"blocked_b{b}_s{j}")   # an older slot requests b
                # k == j included: slot_older[j][j] is always 0 (a slot is not older than
                # itself), so the term is constant; reading it keeps the bit used (lint)
                m.d.comb += blocked.eq(Cat(*[slot_older[j][k] & any_req[k]
                                             for k in range(depth)]).any())
                grant = []
                for i in range(lanes):
                    g = Signal(name=f"grant_b{b}_s{j}_l{i}")
                    m.d.comb += g.eq(reqs[j][i] & ~blocked
                                     & (reqs[j][:i] == 0 if i else Const(1, 1)))
                    grant.append(g)
                    grants.append(g)
                    row = row | Mux(g, slot_rows[j][i], 0)
                issued[j] = issued[j] | Cat(*grant)
            m.d.sync += sr_grant[b].eq(Cat(*grants))
            m.d.comb += [
                lookup_ops[b].valid.eq(Cat(*any_req).any()),
                lookup_ops[b].kind.eq(_OP_LOOKUP),
                lookup_ops[b].key.eq(0),     # SR selects it (s1_key)
                lookup_ops[b].row.eq(row),
            ]
        remaining = [Signal(lanes, name=f"slot{j}_remaining") for j in range(depth)]
        for j in range(depth):
            m.d.comb += remaining[j].eq(slot_mask[j] & ~issued[j])
        # Whether each slot empties this cycle, from registers of the slots (timing: the
        # window's `free` slots drive `lookups.ready`, the accept and the load enables of
        # every slot register; from `remaining` they came after the whole grant logic). A
        # slot empties iff each of its pending lanes is granted: no two of them want the same
        # bank (`slot_dup`) and no older slot wants one of its banks (`slot_banks`: the banks
        # its pending lanes want). Both are registers loaded with the next mask's values; a
        # register copy checks `emptied` against `remaining`.
        slot_banks = [Signal(banks, name=f"slot{j}_banks") for j in range(depth)]
        slot_dup = [Signal(name=f"slot{j}_dup") for j in range(depth)]
        emptied = [Signal(name=f"slot{j}_emptied") for j in range(depth)]
        for j in range(depth):
            clash = Cat(*[slot_older[j][k] & (slot_banks[j] & slot_banks[k]).any()
                          for k in range(depth) if k != j])
            m.d.comb += emptied[j].eq(~slot_dup[j] & ~clash.any())
        self.register_copies = [(f"slot{j} emptied", emptied[j], ~remaining[j].any())
                                for j in range(depth)]
        window_full = ~Cat(*emptied).any()

        sweep_go = Signal()
        sweep_last = Signal()
        m.d.comb += [
            sweep_go.eq(sweep_pending & hold_empty),
            sweep_last.eq(sweep_row == rows - 1),
        ]

        rd_set = self.read_req.payload[:set_bits]
        rd_bank = rd_set[:bank_bits]
        rd_row = rd_set[bank_bits:]
        rd_accept = Signal()
        m.d.comb += [
            self.read_req.ready.eq(hold_empty & ~sweep_pending
                                   & (outstanding < READ_QUEUE_DEPTH)),
            rd_accept.eq(self.read_req.valid & self.read_req.ready),
        ]

        for b in range(banks):
            with m.If(sweep_go):
                m.d.comb += [
                    s0[b].valid.eq(1),
                    s0[b].kind.eq(sweep_kind),
                    s0[b].row.eq(sweep_row),
                ]
            with m.Elif(rd_accept):
                m.d.comb += [
                    s0[b].valid.eq(rd_bank == b),
                    s0[b].kind.eq(_OP_READ),
                    s0[b].row.eq(rd_row),
                ]
            with m.Else():
                m.d.comb += s0[b].eq(lookup_ops[b])

        # --- S1, S2, S3 per bank -------------------------------------------------------
        ways, cbits = cfg.counter_ways, cfg.counter_bits
        resp_en = Const(0, 1)
        resp_data = Const(0, layout.size)
        in_flight = Const(0, 1)
        for b in range(banks):
            # S1 replaces a word read while a write hits its row (the write in `lw`), so the
            # collision's value does not matter: no old-word emulation in block RAM
            mem = Memory(shape=layout, depth=rows, init=[],
                         attrs={COLLISION_ATTR: "dont_care"})
            m.submodules[f"mem_b{b}"] = mem
            rp = mem.read_port()
            wp = mem.write_port()

            s1 = Signal(op_layout, name=f"s1_b{b}")
            s2 = Signal(op_layout, name=f"s2_b{b}")
            s3 = Signal(op_layout, name=f"s3_b{b}")
            # S2's operand: the memory word, or the data of one of the three writes that
            # are newer than the memory word. S1 already takes the newest of the memory word
            # and the two older writes (s2_pre); S2 only chooses between it and s3_new.
            # (The words, counts and rows below have no reset: each is used only while the
            # valid bit of its stage, which resets, says so; 2.2k flip-flops on `ulx3s` stay
            # off the reset net.)
            s2_pre = Signal(layout, name=f"s2_pre_b{b}", reset_less=True)
            # S3 writes our row now (take s3_new), in two copies that share the fanout of
            # the operand multiplexer: one for the keys, one for the valid bits and counts.
            # (Yosys merges flip-flops with equal inputs and equal reset behaviour, so the
            # copies differ in theirs: one has no reset. S2 holds no operation right after a
            # reset, when their values may differ.)
            s2_f1 = [Signal(name=f"s2_f1_{c}_b{b}", init=init, reset_less=rl)
                     for c, (init, rl) in enumerate(((0, False), (0, True)))]
            s2_lk = Signal(name=f"s2_lk_b{b}")      # the kind of S2's op, one-hot
            s2_age = Signal(name=f"s2_age_b{b}")
            s2_clr = Signal(name=f"s2_clr_b{b}")
            s2_rd = Signal(name=f"s2_rd_b{b}")      # S2 holds a read
            s2_old = Signal(layout, name=f"s2_old_b{b}")
            s2_sel = Signal(ways, name=f"s2_sel_b{b}")
            s3_old = Signal(layout, name=f"s3_old_b{b}", reset_less=True)
            s3_flag = Signal(name=f"s3_flag_b{b}")  # valid bit of the ways S3 retags
            s3_tt = Signal(ways, name=f"s3_tag_take_b{b}")
            s3_tc = Signal(ways, name=f"s3_cnt_take_b{b}")
            s3_cnt = Signal(data.ArrayLayout(cbits, ways), name=f"s3_cnt_b{b}",
                            reset_less=True)
            s3_new = Signal(layout, name=f"s3_new_b{b}")
            lw_valid = Signal(name=f"lw_valid_b{b}")
            lw_row = Signal(row_bits, name=f"lw_row_b{b}", reset_less=True)
            lw_data = Signal(layout, name=f"lw_data_b{b}", reset_less=True)
            lw2_valid = Signal(name=f"lw2_valid_b{b}")      # the write before lw's
            lw2_row = Signal(row_bits, name=f"lw2_row_b{b}", reset_less=True)
            lw2_data = Signal(layout, name=f"lw2_data_b{b}", reset_less=True)

            # SR: S0's op is registered and read from the memory (the read address and enable
            # are flip-flops, not the dispatch logic, on the nets that spread over the bank's
            # block RAMs); the key of its lookup is selected for S1 (0 for sweeps and reads,
            # which dispatch no lane)
            sr = Signal(op_layout, name=f"sr_b{b}")
            s1_key = Signal(key_bits, name=f"s1_key_b{b}", reset_less=True)
            m.d.sync += sr.eq(s0[b])
            m.d.comb += [rp.addr.eq(sr.row), rp.en.eq(sr.valid)]
            k1 = Const(0, key_bits)
            for j in range(depth):
                for i in range(lanes):
                    k1 = k1 | Mux(sr_grant[b][j * lanes + i], prev_keys[j][i], 0)
            m.d.sync += [s1.eq(sr), s1_key.eq(k1)]

            # S1: the memory word arrives and goes straight into a register (`m_word`), with
            # its op (`s1w`) and key (timing: the DP16KD's 5.8 ns clock-to-out then ends at
            # flip-flops, not at the forwarding select and the key compares below). Only
            # the op's valid bit (`s1w_v`) has a reset.
            s1w = Signal(op_layout, name=f"s1w_b{b}", reset_less=True)
            s1w_v = Signal(name=f"s1w_v_b{b}")
            s1w_key = Signal(key_bits, name=f"s1w_key_b{b}", reset_less=True)
            m_word = Signal(layout, name=f"m_word_b{b}", reset_less=True)
            m.d.sync += [s1w.eq(s1), s1w_v.eq(s1.valid), s1w_key.eq(s1_key),
                         m_word.eq(rp.data)]

            s2_writes = s2.valid & (s2.kind != _OP_READ)
            s3_writes = s3.valid & (s3.kind != _OP_READ)

            # S1W: the memory word was read at the clock edge that ended SR's cycle, so it
            # misses four writes: the one at that edge (now in lw2: a non-transparent read
            # returns the old word there, and FPGA block RAM an undefined one), the next one
            # (now in lw), the op now in S3 (s3_new) and the op now in S2 (s3_new in S2's
            # cycle). S1W registers the newest of the memory word and the first three as
            # s2_pre (row compares of registers select it), and whether S2 must take s3_new
            # instead (s2_f1, a register select for S2).
            # s2_pre is an AND-OR with one-hot selects: as a chain of 2:1 multiplexers with
            # these (unregistered) selects, the LUT mapper copies the row compares into
            # every bit (tiny: +300 LUT4).
            # The selects are registers: S1 compares its row with those of the ops that will
            # be in S3, lw and lw2 in S1W's cycle (now in S2, S3 and lw), and registers the
            # one-hot choice (timing: the three row compares and their priority, computed in
            # S1W's cycle, reached all 4 x 168 select inputs of the `ulx3s` bank's AND-OR).
            # A register copy checks them against the compares of S1W's cycle.
            f2 = s2_writes & (s2.row == s1.row)
            f3 = s3_writes & (s3.row == s1.row)
            f4 = lw_valid & (lw_row == s1.row)
            sel_new = Signal(name=f"s1_take_new_b{b}")
            sel_lw = Signal(name=f"s1_take_lw_b{b}")
            sel_lw2 = Signal(name=f"s1_take_lw2_b{b}")
            sel_mem = Signal(name=f"s1_take_mem_b{b}")
            m.d.sync += [sel_new.eq(f2), sel_lw.eq(~f2 & f3), sel_lw2.eq(~f2 & ~f3 & f4),
                         sel_mem.eq(~f2 & ~f3 & ~f4)]
            g2 = s3_writes & (s3.row == s1w.row)
            g3 = lw_valid & (lw_row == s1w.row)
            g4 = lw2_valid & (lw2_row == s1w.row)
            self.register_copies.append(
                (f"bank {b}: S1W's selects are its row compares", Const(0, 1),
                 s1w_v & (Cat(sel_new, sel_lw, sel_lw2, sel_mem)
                          != Cat(g2, ~g2 & g3, ~g2 & ~g3 & g4, ~g2 & ~g3 & ~g4))))
            # S1W also makes S2's key compares (so that S2's read-modify-write loop holds no
            # key comparator): way w of the word it selects is valid and holds the lookup's
            # key (s2_pre_hit: each source compared, then the same one-hot AND-OR); the
            # lookup's key equals the key of the op now in S2, which will be in S3 in S2's
            # cycle (s2_key_is_s3), and the key of way w of that op's operand, which will be
            # S3's old word (s2_old_eq).
            s2_pre_hit = Signal(ways, name=f"s2_pre_hit_b{b}")
            s2_key_is_s3 = Signal(name=f"s2_key_is_s3_b{b}")
            s2_old_eq = Signal(ways, name=f"s2_old_eq_b{b}")

            def holds(word, w):
                return word[w].valid & (word[w].key == s1w_key)
            m.d.sync += [
                s2_pre_hit.eq(Cat(*[(sel_new & holds(s3_new, w)) | (sel_lw & holds(lw_data, w))
                                    | (sel_lw2 & holds(lw2_data, w))
                                    | (sel_mem & holds(m_word, w)) for w in range(ways)])),
                s2_key_is_s3.eq(s2.key == s1w_key),
                s2_old_eq.eq(Cat(*[s2_old[w].key == s1w_key for w in range(ways)])),
            ]
            m.d.sync += [
                s2.eq(s1w),
                s2.valid.eq(s1w_v),
                s2.key.eq(s1w_key),
                s2_pre.eq(Mux(sel_new, s3_new.as_value(), 0)
                          | Mux(sel_lw, lw_data.as_value(), 0)
                          | Mux(sel_lw2, lw2_data.as_value(), 0)
                          | Mux(sel_mem, m_word.as_value(), 0)),
                *[s2_f1[c].eq(s2_writes & (s2.row == s1w.row)) for c in range(2)],
                s2_lk.eq(s1w.kind == _OP_LOOKUP),
                s2_age.eq(s1w.kind == _OP_AGE),
                s2_clr.eq(s1w.kind == _OP_CLEAR),
                s2_rd.eq(s1w_v & (s1w.kind == _OP_READ)),
            ]

            # S2: the operand is s3_new or s2_pre, the newest word of the row. S2 decides
            # which ways a lookup writes and computes the counts S3 writes.
            for w in range(ways):
                m.d.comb += [
                    s2_old[w].key.eq(Mux(s2_f1[0], s3_new[w].key, s2_pre[w].key)),
                    s2_old[w].valid.eq(Mux(s2_f1[1], s3_new[w].valid, s2_pre[w].valid)),
                    s2_old[w].count.eq(Mux(s2_f1[1], s3_new[w].count, s2_pre[w].count)),
                ]
            self._decide(m, s2_pre, s2_pre_hit, (s3_flag, s3_tt, s3_tc, s3_cnt, s3_old),
                         (s2_key_is_s3, s2_old_eq), s2_f1, s2_sel, b)
            m.d.sync += [
                s3.eq(s2),
                s3_old.eq(s2_old),
                s3_flag.eq(s2_lk),
                s3_tt.eq(Mux(s2_clr, (1 << ways) - 1, Mux(s2_lk, s2_sel, 0))),
                s3_tc.eq(Mux(s2_clr | s2_age, (1 << ways) - 1, Mux(s2_lk, s2_sel, 0))),
            ]
            for w in range(ways):
                c = s2_old[w].count
                m.d.sync += s3_cnt[w].eq(
                    Mux(s2_age, c >> 1,
                        Mux(s2_clr | ~s2_old[w].valid, Mux(s2_clr, 0, 1), self._sat_inc(c))))

            # S3: apply the decision and write; keep the write in lw for S1.
            # (The key of a sweep op is 0, so a clear writes (0, 0, 0) to every way.)
            self._apply(m, s3_flag, s3.key, s3_tt, s3_tc, s3_cnt, s3_old, s3_new)
            m.d.comb += [
                wp.en.eq(s3_writes),
                wp.addr.eq(s3.row),
                wp.data.eq(s3_new),
            ]
            m.d.sync += [
                lw_valid.eq(s3_writes),
                lw_row.eq(s3.row),
                lw_data.eq(s3_new),
                lw2_valid.eq(lw_valid),
                lw2_row.eq(lw_row),
                lw2_data.eq(lw_data),
            ]

            resp_en = resp_en | s2_rd
            resp_data = resp_data | Mux(s2_rd, s2_old.as_value(), 0)
            in_flight = in_flight | sr.valid | s1.valid | s1w_v | s2.valid | s3.valid

        # --- read responses -------------------------------------------------------------
        m.submodules.resp_queue = queue = SyncFIFO(width=layout.size, depth=READ_QUEUE_DEPTH)
        resp_done = Signal()
        m.d.comb += [
            queue.w_en.eq(resp_en),
            queue.w_data.eq(resp_data),
            self.read_resp.valid.eq(queue.r_rdy),
            self.read_resp.payload.eq(queue.r_data),
            queue.r_en.eq(self.read_resp.ready),
            resp_done.eq(self.read_resp.valid & self.read_resp.ready),
        ]
        m.d.sync += outstanding.eq(outstanding + rd_accept - resp_done)

        # --- status -------------------------------------------------------------------
        m.d.comb += [
            self.busy.eq(sweep_pending),
            self.idle.eq(hold_empty & ~sweep_pending & ~in_flight),
        ]

        # --- sweeps -------------------------------------------------------------------
        with m.If(sweep_go):
            m.d.sync += sweep_row.eq(sweep_row + 1)
            with m.If(sweep_last):
                m.d.sync += [sweep_pending.eq(0), sweep_row.eq(0)]

        # --- input: accept a beat into the dispatch window -------------------------------
        p = self.lookups.payload
        accept = Signal()
        m.d.comb += [
            self.lookups.ready.eq(~self.start & ~window_full
                                  & (~sweep_pending | (sweep_go & sweep_last))),
            accept.eq(self.lookups.valid & self.lookups.ready),
        ]
        good = []
        for i in range(lanes):
            if cfg.num_tables < (1 << cfg.table_bits):
                good.append(p.keys[i][cfg.row_bits:key_bits] < cfg.num_tables)
            else:
                good.append(Const(1, 1))
        sampled_now = phase_zero
        new_mask = Signal(lanes)
        m.d.comb += new_mask.eq(Cat(*[p.keep[i] & good[i] for i in range(lanes)])
                                & Mux(sampled_now, (1 << lanes) - 1, 0))
        new_count = popcount(new_mask[i] for i in range(lanes))
        new_sets = Signal(data.ArrayLayout(set_bits, lanes))
        for i in range(lanes):
            m.d.comb += new_sets[i].eq(h3_expr(p.keys[i], SEED_COUNTER, key_bits, set_bits))

        # The next window: every slot keeps its lanes still to dispatch; an accepted beat
        # goes into the lowest slot left empty, as the youngest.
        free = emptied

        pairs = [(i, k) for i in range(lanes) for k in range(i + 1, lanes)]

        def banks_and_dup(mask, bank, same):
            """The banks the lanes of ``mask`` want (one-hot ``bank[i]`` per lane), and
            whether two of them want the same bank (``same``: a bit per lane pair)."""
            acc = Const(0, banks)
            for i in range(lanes):
                acc = acc | Mux(mask[i], bank[i], 0)
            dup = Const(0, 1)
            for n, (i, k) in enumerate(pairs):
                dup = dup | (mask[i] & mask[k] & same[n])
            return acc, dup

        # the beat's one-hot bank per lane, and its lane pairs (i, k) in one bank
        new_bank = data.View(data.ArrayLayout(banks, lanes), Cat(*[
            Cat(*[new_sets[i][:bank_bits] == b for b in range(banks)]) for i in range(lanes)]))
        new_same = Cat(*[new_sets[i][:bank_bits] == new_sets[k][:bank_bits] for i, k in pairs])
        load_banks, load_dup = banks_and_dup(new_mask, new_bank, new_same)
        # per slot, the lane pairs in one bank (loaded with the beat, as its banks)
        slot_same = [Signal(max(1, len(pairs)), name=f"slot{j}_same", reset_less=True)
                     for j in range(depth)]
        loads = []
        for j in range(depth):
            load = Signal(name=f"slot{j}_load")
            loads.append(load)
            m.d.comb += load.eq(accept & free[j] & Cat(*[~f for f in free[:j]]).all())
            with m.If(load):
                m.d.sync += [
                    slot_mask[j].eq(new_mask),
                    slot_keys[j].eq(p.keys),
                    slot_rows[j].eq(Cat(*[new_sets[i][bank_bits:] for i in range(lanes)])),
                    slot_bank[j].eq(new_bank),
                    slot_same[j].eq(new_same),
                    slot_banks[j].eq(load_banks),
                    slot_dup[j].eq(load_dup),
                ]
            with m.Else():
                keep_banks, keep_dup = banks_and_dup(remaining[j], slot_bank[j], slot_same[j])
                m.d.sync += [slot_mask[j].eq(remaining[j]), slot_banks[j].eq(keep_banks),
                             slot_dup[j].eq(keep_dup)]
        # a loaded slot: every other slot is older than it, it is older than none
        for j in range(depth):
            m.d.sync += slot_older[j].eq(Cat(*[
                Const(0, 1) if k == j else Mux(loads[j], 1, Mux(loads[k], 0, slot_older[j][k]))
                for k in range(depth)]))

        period = Mux(self.learn_period == 0, 1, self.learn_period)
        phase_next = phase + 1

        # learned is updated one cycle after the accept, from a register (learned_add),
        # so that the popcount of the beat and the 32-bit adder are in different cycles.
        m.d.sync += [
            learned_add.eq(Mux(accept, new_count, 0)),
            self.learned.eq(self.learned + learned_add),
        ]
        with m.If(accept):
            with m.If(p.last):
                m.d.sync += [
                    self.minibatches.eq(self.minibatches + 1),
                    phase.eq(Mux(phase_next >= period, 0, phase_next)),
                    phase_zero.eq(phase_next >= period),
                ]
                with m.If(sampled_now):
                    m.d.sync += self.sampled.eq(self.sampled + 1)
                    if cfg.aging_period:
                        with m.If(age_count == cfg.aging_period - 1):
                            m.d.sync += [
                                age_count.eq(0),
                                sweep_pending.eq(1),
                                sweep_kind.eq(_OP_AGE),
                                sweep_row.eq(0),
                            ]
                        with m.Else():
                            m.d.sync += age_count.eq(age_count + 1)

        # --- start: a new learning phase (highest priority) --------------------------------
        with m.If(self.start):
            m.d.sync += [slot_mask[j].eq(0) for j in range(depth)]
            m.d.sync += [slot_banks[j].eq(0) for j in range(depth)]
            m.d.sync += [slot_dup[j].eq(0) for j in range(depth)]
            m.d.sync += [
                sweep_pending.eq(1),
                sweep_kind.eq(_OP_CLEAR),
                sweep_row.eq(0),
                phase.eq(0),
                phase_zero.eq(1),
                self.sampled.eq(0),
                self.learned.eq(0),
                learned_add.eq(0),
                self.minibatches.eq(0),
            ]
            if cfg.aging_period:
                m.d.sync += age_count.eq(0)

        return m
