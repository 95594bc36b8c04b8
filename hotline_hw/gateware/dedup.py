"""One bank of the fragmenter's miss de-duplication table.

The de-dup table of ``golden.fragment.dedup_assign`` (``dedup_sets`` sets of ``dedup_ways``
ways, set ``h3(key, SEED_DEDUP)``) is split by the low bits of the set into
:func:`dedup_banks` banks, each answering one miss per cycle, so that the fragmenter can
de-duplicate up to ``lanes`` misses per cycle without a multi-ported RAM. Banking changes no
result: a key always goes to the same bank, and each bank sees its misses in stream order.

A bank
------
* **in_q** (a register ring, :class:`RingQueue`): misses ``{key, lset}`` (``lset`` = set
  within the bank), up to ``lanes`` per cycle, in stream order; each lane writes its own entry.
* **Lookup** (5 stages, one miss per cycle): ``B0`` reads the set word from block RAM
  (transparent to the RAM's write, which is ``B3``'s decision of the cycle before, from
  registers); ``B1`` registers the word as read (the RAM's output goes straight into
  flip-flops); ``B2`` compares each way with the key and registers the
  word, the free ways, whether a way holds the key and its ordinal, whether a way is free
  and whether exactly one is; ``B3`` chooses. A way holding the
  key -> ``DUP(ord)``; else the lowest free way takes the key -> ``NEW(ord)`` with ``ord``
  the bank's next ordinal (0, 1, 2, ... per mini-batch); no free way -> ``FULL``. The three
  misses right behind a ``NEW`` to the same set read the word before that write: ``B2``
  puts the writes decided two cycles and one cycle before into the word it registers, and
  the write of its own cycle (the op in ``B3``) into its ``B3`` (the written way is used,
  and holds its key if the keys are equal, a compare of registers made in ``B2``). Four
  misses apart, the read sees the write (transparency). A set is *touched* once written in
  the current mini-batch; an untouched set reads as empty, so starting a mini-batch is one
  cycle (a register per set is cleared), never a sweep of the RAM. Timing: the RAM read ends at a
  register; the compares, the way choice, the ``NEW`` write and the result push each start
  from registers. ``B4`` pushes ``B3``'s result into res_q, with the entry's flags (below)
  from compares ``B3`` made and registered.
* **res_q** (a shifting register queue, :class:`MultiQueue`): results in stream order, read
  ``lanes`` at a time by the fragmenter's retire stage, which gives every ``NEW`` its
  staging index in stream order.
* **Index memory**: the retire stage pushes each ``NEW``'s index (or *refused*, when the
  staging bank was full) into **wq** (a :class:`RingQueue`), in ordinal order; wq drains
  one per cycle into a RAM addressed by ordinal (``drained`` counts them).
* **Resolver**: walks res_q in order and fills in the index of each ``DUP``: from the RAM
  when its ordinal is below ``drained`` (one cycle), straight from wq when the value is
  still queued (ordinal below ``pushed``, the values pushed into wq), else it waits: the
  ``NEW`` has not retired yet; it passes such a ``DUP`` of the fragmenter's next beat
  (``head_need``), whose index the fragmenter forwards (waiting there would hold up the
  ``DUP`` entries behind it in the same beat, a deadlock). A ``DUP`` whose ``NEW`` is in the same input beat, in the beat
  being assigned or in the beat retired last, is resolved by the fragmenter's retire stages
  (forwarding); they may pop an entry whose RAM read the resolver has just started, and the
  read is then dropped (``r_wait`` is set only for an entry that stays).

Bank ``b`` of set ``s``: ``b = s % banks``, ``lset = s // banks``.
"""

from amaranth.hdl import Array, Cat, Const, Elaboratable, Module, Mux, Signal
from amaranth.lib import data
from amaranth.lib.memory import Memory
from amaranth.utils import ceil_log2, exact_log2

from .bits import need_bit, popcount
from .queues import MultiQueue, RingQueue

__all__ = ["dedup_banks", "DedupBank", "KIND_NEW", "KIND_DUP", "KIND_FULL", "priority"]

KIND_NEW, KIND_DUP, KIND_FULL = 1, 2, 3

#: sets per group of the two-stage read of the touched bits (see ``DedupBank``)
TOUCHED_GROUP = 32


def dedup_banks(cfg):
    """Banks of the de-dup table: ``cfg.dedup_banks``; when 0, ``lanes`` (at least 2), at
    most ``dedup_sets / 2`` (one bank when ``dedup_sets`` is 1)."""
    if cfg.dedup_banks:
        return cfg.dedup_banks
    return max(1, min(cfg.dedup_sets // 2, max(2, cfg.lanes)))


def _pow2_at_least(n):
    return 1 << ceil_log2(max(2, n))


class BankGeometry:
    """Sizes derived from the configuration (shared by the bank and the fragmenter)."""

    def __init__(self, cfg):
        self.banks = dedup_banks(cfg)
        self.bank_bits = ceil_log2(self.banks)
        self.sets = cfg.dedup_sets // self.banks            # sets per bank
        self.lset_bits = ceil_log2(self.sets)
        self.entries = self.sets * cfg.dedup_ways
        self.ord_bits = max(1, ceil_log2(self.entries))
        self.index_bits = cfg.staging_index_bits
        self.value_bits = self.index_bits + 1               # top bit: refused
        self.in_depth = _pow2_at_least(max(4, cfg.lanes))
        self.res_depth = _pow2_at_least(max(8, cfg.lanes))
        self.wq_depth = _pow2_at_least(max(4, cfg.lanes))

    def op_layout(self, cfg):
        return data.StructLayout({"key": cfg.key_bits, "lset": self.lset_bits})

    def result_layout(self):
        return data.StructLayout({"kind": 2, "ord": self.ord_bits, "resolved": 1,
                                  "value": self.value_bits})


def priority(bits, values=None, with_any=True):
    """``(any, index, value, stmts)``: whether a bit of ``bits`` is set (``None`` without
    ``with_any``), the lowest set one, ``values[index]`` (``None`` without ``values``), and
    the ``comb`` statements that drive them (add them to the module)."""
    n = len(bits)
    any_ = Signal() if with_any else None
    idx = Signal(range(max(2, n)))
    ci = Const(0, idx.shape())
    cv = Const(0, len(values[0])) if values is not None else None
    for i in reversed(range(n)):          # lowest index wins
        ci = Mux(bits[i], i, ci)
        if values is not None:
            cv = Mux(bits[i], values[i], cv)
    stmts = [idx.eq(ci)] + ([any_.eq(Cat(*bits).any())] if with_any else [])
    val = None
    if values is not None:
        val = Signal(len(values[0]))
        stmts.append(val.eq(cv))
    return any_, idx, val, stmts


class DedupBank(Elaboratable):
    """One bank (see the module docstring).

    Members used by the fragmenter
    ------------------------------
    in_q : :class:`RingQueue` of ``op_layout`` (push side: ``push_n``, ``wr_*``, ``space``).
    res_q : :class:`MultiQueue` of ``result_layout`` (pop side: ``level``, ``peek``, ``pop_n``,
        ``pop_en``: the fragmenter drives ``pop_n`` with the beat's count, a register, and
        ``pop_en`` with its take, the latest signal).
    wq : :class:`RingQueue` of ``value_bits`` (push side: ``push_n`` and ``push_en`` as
        ``res_q``'s pop). It restarts with each mini-batch,
        so the value of ordinal ``o`` is at slot ``o % wq_depth`` while queued.
    head_need : In, ``0 .. lanes``
        Results ``0 .. head_need - 1`` of res_q belong to the fragmenter's next beat to
        leave (0 if none is waiting), which forwards the index of a ``DUP`` whose ``NEW``
        has not retired: the resolver passes such a ``DUP`` there instead of waiting.
    fwd_lo : In, an ordinal
        A ``DUP`` with ordinal ``>= fwd_lo`` may leave unresolved: the fragmenter forwards
        its index (its ``NEW`` is in the beat retired last or later). A register of the
        fragmenter, which tells the bank its next value:
    fwd_step, fwd_cnt : In
        ``fwd_lo`` takes ``fwd_cnt`` at this cycle's edge when ``fwd_step`` (the fragmenter's
        retire); ``fwd_cnt`` is a register of the fragmenter, 0 when the step ends the
        mini-batch. (The bank keeps each result's ``ord >= fwd_lo`` as a flip-flop.)
    take_ok : Out(lanes), a register
        Bit ``k``: res_q holds entries ``0 .. k`` and each may leave now: not a ``DUP``,
        resolved, or a ``DUP`` with ordinal ``>= fwd_lo``. Computed from the previous
        cycle's entries and ``fwd_lo`` for the places after its pop (``pop_en`` selects
        last): an entry pushed or resolved counts a cycle later. (The fragmenter keeps
        its own copy of bit ``need - 1`` for the beat it takes next, from ``ok_pop`` and
        ``ok_keep``; this register is what the amaranth.sim tests check that copy against,
        and nothing else reads it.)
    need_pop, need_keep : In, a count
        The need (results it takes) of the beat the fragmenter takes next, if it pops
        ``pop_n`` results now (``need_pop``) and if not (``need_keep``).
    ok_pop, ok_keep : Out(1)
        ``take_ok``'s next value at bit ``need_pop - 1`` if the fragmenter pops now, and at
        bit ``need_keep - 1`` if not (1 for a need of 0).
    batch_start : In(1)
        Pulse between mini-batches (only while :attr:`idle`): forget every key. The bank
        forgets in the next cycle; ops may be pushed from that cycle on.
    idle : Out(1)
        Nothing queued or in flight in the bank.
    """

    def __init__(self, cfg, geo, index):
        self.cfg, self.geo, self.index = cfg, geo, index
        L = cfg.lanes
        p = f"b{index}"
        self.in_q = RingQueue(geo.op_layout(cfg), geo.in_depth, L, 1,
                              name=f"{p}_in")
        # the resolver only sets `resolved` and `value` (the last fields): only they are updated
        rl = geo.result_layout()
        upd = (rl["resolved"].offset, rl.size)
        assert rl["value"].offset + rl["value"].width == rl.size
        self.res_q = MultiQueue(rl, geo.res_depth, 1, L, update=upd, name=f"{p}_res")
        self.wq = RingQueue(geo.value_bits, geo.wq_depth, L, 1, space_drained=True,
                            name=f"{p}_wq")
        self.head_need = Signal(range(L + 1), name=f"{p}_head_need")
        self.fwd_lo = Signal(range(geo.entries + 1), name=f"{p}_fwd_lo")
        self.fwd_step = Signal(name=f"{p}_fwd_step")
        self.fwd_cnt = Signal(range(geo.entries + 1), name=f"{p}_fwd_cnt")
        self.take_ok = Signal(L, name=f"{p}_take_ok")
        self.need_pop = Signal(range(L + 1), name=f"{p}_need_pop")
        self.need_keep = Signal(range(L + 1), name=f"{p}_need_keep")
        self.ok_pop = Signal(name=f"{p}_ok_pop")
        self.ok_keep = Signal(name=f"{p}_ok_keep")
        self.batch_start = Signal(name=f"{p}_batch_start")
        self.idle = Signal(name=f"{p}_idle")

    def elaborate(self, platform):
        cfg, geo = self.cfg, self.geo
        m = Module()
        self.register_copies = []
        m.submodules.in_q = in_q = self.in_q
        m.submodules.res_q = res_q = self.res_q
        m.submodules.wq = wq = self.wq
        kb, ways, ob = cfg.key_bits, cfg.dedup_ways, geo.ord_bits

        entry = data.StructLayout({"used": 1, "key": kb, "ord": ob})
        word_layout = data.ArrayLayout(entry, ways)
        m.submodules.table = table = Memory(shape=word_layout, depth=geo.sets, init=[])
        wp = table.write_port()
        rp = table.read_port(transparent_for=(wp,))

        touched = Signal(geo.sets)
        newcnt = Signal(range(geo.entries + 1))

        # --- B0: issue one miss --------------------------------------------------------
        # An op is issued when res_q has room for it and the ops in B1 .. B3. The stages
        # never stall: an op reads its set word at B0 in cycle c and decides its write at B3
        # in cycle c + 3; a write reaches the RAM a cycle after its decision, so the word
        # read misses the writes decided in cycles c, c + 1 and c + 2 (the three ops ahead
        # of it): B2 puts the first two into the word, B3 the third.
        b1_valid = Signal()
        b2_valid = Signal()
        b3_valid = Signal()
        b4_valid = Signal()                  # B3's result, pushed into res_q now
        # (the ops and words of B1-B3 have no reset: each is used only while its stage's
        # valid bit, which resets, says so; they stay off the reset net)
        b1_op = Signal(geo.op_layout(cfg), reset_less=True)
        b2_op = Signal(geo.op_layout(cfg), reset_less=True)
        b3_op = Signal(geo.op_layout(cfg), reset_less=True)
        op = in_q.peek[0]
        issue = Signal()
        m.d.comb += [
            issue.eq((in_q.level != 0)
                     & (res_q.space > b1_valid + b2_valid + b3_valid + b4_valid)),
            in_q.pop_n.eq(issue),
            rp.addr.eq(op.lset),
        ]
        m.d.sync += [b1_valid.eq(issue), b1_op.eq(op)]

        # --- B1: the set word arrives, straight into a register ----------------------------
        # (timing: the block RAM's clock-to-output ends at flip-flops; the DP16KD has no
        # output register in Yosys' mapping). The set's touched bit is read here, from the
        # registered set (a `sets`-to-1 multiplexer: from the queue's head entry it was the
        # slowest path of `ulx3s`). The word read at B0 holds every write up to that cycle
        # (the read port is transparent to B3's write); `touched` now holds the same
        # writes, as B3's write of the B0 cycle has been registered into it.
        # With more than 32 sets the multiplexer is cut in two, a stage earlier: B0 picks
        # the bit of every group of 32 sets (`b1_tgrp`, one 32-to-1 multiplexer per group)
        # and whether the write registered into `touched` in its cycle (w1) is to the op's
        # set (`b1_thit`); B1 picks the group's bit and adds that write, so `b2_touched` is
        # a register (timing: the group select in B2 sat ahead of the ways' compares, and
        # the ulx3s placer put it far from the bank). A register copy checks it against
        # the one-step select of B1.
        b2_raw = Signal(word_layout, reset_less=True)
        b2_touched = Signal()
        m.d.sync += [b2_valid.eq(b1_valid), b2_op.eq(b1_op), b2_raw.eq(rp.data)]
        gsz = TOUCHED_GROUP
        touched_split = geo.sets > gsz
        if not touched_split:
            m.d.sync += b2_touched.eq(touched.bit_select(b1_op.lset, 1))

        # --- B2: compare the ways; put in the writes the word missed ------------------------
        # The word read missed the writes of this cycle (the op in B3) and of the cycle
        # before (`w1_*`, registered). The earlier one goes into the word here (a register
        # compare of the sets, side by side with the ways' compares); this cycle's write
        # is decided now, so it goes into B3's word (`fa_*`: a one-hot way or 0, whether it
        # wrote the same key, the entry written).
        # An untouched set reads as empty: only the ways' `used` bits are gated (timing:
        # `b2_touched`, the end of the touched-bit select, then reaches `ways` gates in
        # parallel with the key compares, not every bit of the word ahead of them). The key
        # and ordinal of a way not in use mean nothing and are written back as read.
        cur = Signal(word_layout)
        for w in range(ways):
            m.d.comb += [cur[w].eq(b2_raw[w]), cur[w].used.eq(b2_raw[w].used & b2_touched)]
        # The table's write is registered (`w1_*`: it reaches the block RAM a cycle after
        # B3 decides it, with a flip-flop enable, not B3's decision, on the net to the
        # RAMs), so the word read at B0 in cycle c also misses the write decided in c - 1
        # (`w2_*`, physically written in c). Each write fills a way that was free in every
        # word it missed, so the three missed writes go into different ways.
        w1_valid = Signal()                  # a write decided in the previous cycle ...
        w1_lset = Signal(geo.lset_bits)
        w1_oh = Signal(ways)
        w1_entry = Signal(entry)
        w1_word = Signal(word_layout, reset_less=True)    # ... and its set's new word
        w2_valid = Signal()                  # a write decided two cycles ago ...
        w2_lset = Signal(geo.lset_bits)
        w2_oh = Signal(ways)
        w2_entry = Signal(entry)
        if touched_split:
            gbits = exact_log2(gsz)
            groups = geo.sets // gsz             # sets: a power of two
            b1_tgrp = Signal(groups)
            b1_thit = Signal()
            m.d.sync += [
                b1_tgrp.eq(Cat(touched[g * gsz:(g + 1) * gsz].bit_select(op.lset[:gbits], 1)
                               for g in range(groups))),
                b1_thit.eq(w1_valid & (w1_lset == op.lset)),
                b2_touched.eq(b1_tgrp.bit_select(b1_op.lset[gbits:], 1) | b1_thit),
            ]
            # the reference (nothing else reads it; Yosys removes it)
            b2_touched_ref = Signal()
            m.d.sync += b2_touched_ref.eq(touched.bit_select(b1_op.lset, 1))
            self.register_copies.append(
                (f"dedup bank {self.index}: B2's touched bit", Const(0, 1),
                 b2_valid & (b2_touched != b2_touched_ref)))
        # Whether the missed writes are to B2's set (`b2_s1`, `b2_s2`) and of B2's key
        # (`b2_k1`, `b2_k2`), and whether the op ahead is in B2's set and has its key
        # (`b3_s`, `b3_k`, for `fa`), as registers compared a cycle early (timing: the set
        # and key compares of registers then sit ahead of flip-flops, not of the way
        # choice into B3's ordinal, which led the `ulx3s` route). The stages never stall,
        # so the operands a cycle early are the stage ahead's: B1's op becomes B2's; B3's
        # op and new entry become w1's, w1 becomes w2, and B2's op becomes B3's. Register
        # copies check each against its compare.
        b2_s1 = Signal(reset_less=True)
        b2_k1 = Signal(reset_less=True)
        b2_s2 = Signal(reset_less=True)
        b2_k2 = Signal(reset_less=True)
        b3_s = Signal(reset_less=True)
        b3_k = Signal(reset_less=True)
        s1_next = b3_op.lset == b1_op.lset
        s2_next = w1_lset == b1_op.lset
        s3_next = b2_op.lset == b1_op.lset
        m.d.sync += [
            b2_s1.eq(s1_next), b2_k1.eq(s1_next & (b3_op.key == b1_op.key)),
            b2_s2.eq(s2_next), b2_k2.eq(s2_next & (w1_entry.key == b1_op.key)),
            b3_s.eq(s3_next), b3_k.eq(s3_next & (b2_op.key == b1_op.key)),
        ]
        fb_oh = Signal(ways)
        fc_oh = Signal(ways)
        fb_m = Signal()                      # the write a cycle back is of B2's key
        fc_m = Signal()                      # the write two cycles back is of B2's key
        m.d.comb += [fb_oh.eq(Mux(w1_valid & b2_s1, w1_oh, 0)),
                     fc_oh.eq(Mux(w2_valid & b2_s2, w2_oh, 0)),
                     fb_m.eq(w1_valid & b2_k1), fc_m.eq(w2_valid & b2_k2)]
        b3_word = Signal(word_layout, reset_less=True)
        b3_free = Signal(ways)               # way w is free (with the earlier writes)
        fa_oh = Signal(ways)
        fa_entry = Signal(entry)
        fa_any = Signal()                    # the op ahead wrote our set (fa_oh != 0) ...
        fa_m = Signal()                      # ... with our key
        # B3's result from registers (timing: it reaches the result queue's entry
        # multiplexers): B2 also registers whether a way of the word (with the earlier
        # writes) holds the key and its ordinal, whether a way is free and whether exactly
        # one is. The only write they miss is the op ahead's (`fa_*`, decided in B2's
        # cycle): it fills a way free in our word (the op ahead saw every write we see), so
        # a match with its new entry excludes one in the word (else that op would have
        # matched rather than allocated), and it takes one of our free ways.
        b2_match = Signal(ways)
        b2_free = Signal(ways)
        b3_m_any = Signal()
        b3_match = Signal(ways)
        b3_f_any = Signal()
        b3_f_one = Signal()
        # B2 registers the matching ways (`b3_match`: the word's, and the way a missed
        # write filled if it wrote the key); B3 reads the matching ordinal out of its word,
        # which holds the missed writes' entries in their ways (timing: the ordinal's
        # AND-OR after the key compares was B2's longest path, into `b3_m_ord`; with the
        # result pushed at B4, B3 has the time). The matches are one-hot (a key is in at
        # most one way; the register copy below), so the ordinal is an AND-OR.
        cur_m = Signal(ways)
        m.d.comb += cur_m.eq(Cat(*[cur[w].used & (cur[w].key == b2_op.key)
                                   for w in range(ways)]))
        m.d.comb += [
            b2_match.eq(cur_m | Mux(fb_m, w1_oh, 0) | Mux(fc_m, w2_oh, 0)),
            b2_free.eq(Cat(*[~cur[w].used for w in range(ways)]) & ~fb_oh & ~fc_oh),
        ]
        m.d.sync += [
            b3_valid.eq(b2_valid),
            b3_op.eq(b2_op),
            b3_word.eq(Cat(*[Mux(fb_oh[w], w1_entry, Mux(fc_oh[w], w2_entry, cur[w]))
                             for w in range(ways)])),
            b3_free.eq(b2_free),
            b3_m_any.eq(b2_match.any()),
            b3_match.eq(b2_match),
            b3_f_any.eq(b2_free.any()),
            b3_f_one.eq(popcount(b2_free[w] for w in range(ways)) == 1),
        ]

        # --- B3: choose, allocate, write ---------------------------------------------------
        word = Signal(word_layout)           # the set word with both missed writes
        for w in range(ways):
            m.d.comb += word[w].eq(Mux(fa_oh[w], fa_entry, b3_word[w]))
        free = Signal(ways)
        m.d.comb += free.eq(b3_free & ~fa_oh)
        # whether the key is held, its ordinal, whether a way is free: from B2's registers
        # and the op ahead's write (see above)
        m_any = Signal()
        m_ord = Signal(geo.ord_bits)
        b3_word_ord = Const(0, geo.ord_bits)     # the ordinal of the word's matching way
        for w in range(ways):
            b3_word_ord = b3_word_ord | Mux(b3_match[w], b3_word[w].ord, 0)
        f_any = Signal()
        m.d.comb += [m_any.eq(b3_m_any | fa_m),
                     m_ord.eq(Mux(fa_m, fa_entry.ord, b3_word_ord)),
                     f_any.eq(b3_f_any & ~(fa_any & b3_f_one))]
        # The amaranth.sim tests check the two facts this rests on in every cycle (the
        # register copies below): a key is in at most one way of its set (B2's matching
        # ways are one-hot or 0, and a match with the op ahead's new entry excludes one in
        # the word; a NEW is written only where no way holds the key, with every write its
        # word missed put in), and the op ahead's new entry fills one of our free ways.
        bank = f"dedup bank {self.index}"
        self.register_copies += [
            (f"{bank}: batch_start only while idle", Const(0, 1), self.batch_start & ~self.idle),
            (f"{bank}: B2 match one-hot", Const(0, 1),
             b2_valid & ((b2_match & (b2_match - 1)) != 0)),
            (f"{bank}: B3 match in the word or with the op ahead, not both", Const(0, 1),
             b3_valid & fa_m & b3_m_any),
            (f"{bank}: the op ahead fills one of our free ways", Const(0, 1),
             b3_valid & fa_any & ((fa_oh & ~b3_free) != 0)),
            (f"{bank}: the missed writes fill ways free in B2's word", Const(0, 1),
             b2_valid & (((fb_oh | fc_oh) & Cat(*[cur[w].used for w in range(ways)])) != 0)),
        ]
        # the compares registered a cycle early (see b2_s1 .. b3_k)
        for n, reg, ref in (
                ("b2_s1", b2_s1, w1_lset == b2_op.lset),
                ("b2_k1", b2_k1, (w1_lset == b2_op.lset) & (w1_entry.key == b2_op.key)),
                ("b2_s2", b2_s2, w2_lset == b2_op.lset),
                ("b2_k2", b2_k2, (w2_lset == b2_op.lset) & (w2_entry.key == b2_op.key)),
                ("b3_s", b3_s, b3_op.lset == b2_op.lset),
                ("b3_k", b3_k, (b3_op.lset == b2_op.lset) & (b3_op.key == b2_op.key))):
            valid = b3_valid & b2_valid if n.startswith("b3") else b2_valid
            self.register_copies.append(
                (f"{bank}: {n} is its compare a cycle late", Const(0, 1),
                 valid & (reg != ref)))
        _, f_way, _, s2 = priority([free[w] for w in range(ways)], with_any=False)
        m.d.comb += s2
        b3_new = Signal()
        m.d.comb += b3_new.eq(b3_valid & ~m_any & f_any)
        new_entry = Signal(entry)
        m.d.comb += [new_entry.used.eq(1), new_entry.key.eq(b3_op.key), new_entry.ord.eq(newcnt)]
        new_oh = Cat(*[f_way == w for w in range(ways)])
        new_word = Signal(word_layout)
        m.d.comb += new_word.eq(word)
        for w in range(ways):
            with m.If(f_way == w):
                m.d.comb += new_word[w].eq(new_entry)
        m.d.comb += [wp.addr.eq(w1_lset), wp.data.eq(w1_word), wp.en.eq(w1_valid)]
        # this cycle's write, for the op in B2 (it reaches B3 next cycle), as w1_* for the
        # op in B1 (in B2 next cycle; also the RAM's write) and as w2_* for the op in B0
        fa = b3_new & b3_s
        m.d.sync += [
            fa_oh.eq(Mux(fa, new_oh, 0)),
            fa_any.eq(fa),
            fa_m.eq(b3_new & b3_k),
            fa_entry.eq(new_entry),
            w1_valid.eq(b3_new),
            w1_lset.eq(b3_op.lset),
            w1_oh.eq(new_oh),
            w1_entry.eq(new_entry),
            w1_word.eq(new_word),
            w2_valid.eq(w1_valid),
            w2_lset.eq(w1_lset),
            w2_oh.eq(w1_oh),
            w2_entry.eq(w1_entry),
        ]
        # --- B4: push B3's result -----------------------------------------------------
        # (a register stage: the flags of the entry pushed are selected from compares of
        # B3's ordinal that B3 registers, see `entry_flags`)
        b4_kind = Signal(2, reset_less=True)
        b4_ord = Signal(geo.ord_bits, reset_less=True)
        b3_ord = Signal(geo.ord_bits)        # B3's result's ordinal (B4's next)
        m.d.comb += b3_ord.eq(Mux(m_any, m_ord, newcnt))
        m.d.sync += [
            b4_valid.eq(b3_valid),
            b4_kind.eq(Mux(m_any, KIND_DUP, Mux(f_any, KIND_NEW, KIND_FULL))),
            b4_ord.eq(b3_ord),
        ]
        res = res_q.wr_data[0]
        m.d.comb += [
            res_q.push_n.eq(b4_valid),
            res_q.wr_en.eq(b4_valid),
            res.kind.eq(b4_kind),
            res.ord.eq(b4_ord),
        ]
        # Set the written set's bit through a decoder: an indexed assignment
        # (`touched.bit_select(...).eq(1)`) becomes a case statement whose every branch Yosys
        # turns into a mux per bit, O(sets^2) cells (it ran the `kaggle` synthesis out of
        # memory); a decoder is one comparator per set.
        # `touched` is set with the RAM's write (w1), so that it holds the same writes as
        # the word read in the same cycle
        with m.If(b3_new):
            m.d.sync += newcnt.eq(newcnt + 1)
        with m.If(w1_valid):
            m.d.sync += touched.eq(touched | Cat(w1_lset == s for s in range(geo.sets)))

        # --- index memory: wq drains into it -------------------------------------------
        m.submodules.index = imem = Memory(shape=geo.value_bits, depth=geo.entries, init=[])
        iw = imem.write_port()
        ir = imem.read_port(transparent_for=())
        drained = Signal(range(geo.entries + 1))
        drain = wq.level != 0
        m.d.comb += [iw.addr.eq(drained), iw.data.eq(wq.peek[0]), iw.en.eq(drain),
                     wq.pop_n.eq(drain)]
        m.d.sync += drained.eq(drained + drain)
        # The restart acts a cycle after `batch_start`, from a register of the bank (timing:
        # it resets some 500 flip-flops per bank; the fragmenter's start decision then
        # reaches one register per bank, not every reset pin). Sound because the bank is
        # idle at the pulse and gets its first op at the earliest in the pulse's next cycle
        # (`in_q`), which B1 reads a cycle after that: the restart is done by then, and
        # nothing else writes what it clears meanwhile (no result, no write-back while
        # idle). `& idle` keeps the banks' registers apart (Yosys would merge equal ones).
        restart = wq.restart                 # (the write queue's restart is the register)
        m.d.sync += restart.eq(self.batch_start & self.idle)
        self.register_copies.append(
            (f"{bank}: the restart acts while idle", Const(0, 1), restart & ~self.idle))

        # --- per-entry flags of res_q as flip-flops -------------------------------------------
        # Compares of each result's ordinal with a register of the bank or the fragmenter,
        # kept as flip-flops that move with their entries like res_q's registers (pop_en
        # selects last): the resolver and take_ok select and AND flags, with no ordinal
        # compare after their entries (timing: the compares, carry chains from the
        # entries, started the resolver's loop through rptr and take_ok's logic). A flag's
        # next value for a held entry is its flag updated by the register's change this
        # cycle; for the entry pushed now (B4), the compare of its ordinal (that of a `DUP`
        # is the only one whose flags are read) with the register's next value. For
        # `known` and `in_ram` that compare is selected from compares B3 made of its
        # ordinal with the register plus each step it can take in B3's and B4's cycles
        # (timing: the compare of B3's ordinal, itself a choice of two registers, ahead of
        # the flags' selects was the `ulx3s` route's slowest path after take's).
        # Register copies check every flag of a held `DUP` against its compare.
        rl = geo.result_layout()
        depth = geo.res_depth
        pop, pop_en = res_q.pop_n, res_q.pop_en
        L = cfg.lanes
        ents = [data.View(rl, res_q.entries[k]) for k in range(depth)]

        def entry_flags(name, held_next, pushed_next, compare, late=None):
            """``held_next(flag, ordinal, l)``: the next flag of a held entry;
            ``pushed_next(l)``: the flag of B4's ordinal pushed now;
            ``compare(ordinal)``: the value the flag copies (for the register copy);
            ``late``: a late signal of the fragmenter (its retire) the flag's change depends
            on, or None. ``l`` is its value, a constant: each flag's next value is made for
            both and selected by ``late`` after the pop's select, ahead of ``pop_en`` only
            (timing: retire entered the flags' logic ahead of the compares' selects and the
            pop's select, six LUT levels from the retire copy to the `known` flags, 12.19 ns,
            in the branch's 85 MHz tier)."""
            flags = [Signal(name=f"b{self.index}_{name}{k}") for k in range(depth)]
            lvals = (0, 1) if late is not None else (0,)
            push_flag = [Signal(name=f"b{self.index}_{name}_push{l}") for l in lvals]
            for l in lvals:
                m.d.comb += push_flag[l].eq(pushed_next(l))
            for j in range(depth):
                nxt = {}                     # (popped, l) -> next value
                for l in lvals:
                    cands = []
                    for p in range(L + 1):
                        s = j + p
                        if s >= depth:
                            cands.append(flags[j])
                            continue
                        cands.append(Mux(b4_valid & (res_q.level == s), push_flag[l],
                                         held_next(flags[s], ents[s].ord, l)))
                    nxt[1, l] = Array(cands)[pop]
                    nxt[0, l] = cands[0]
                if late is None:
                    m.d.sync += flags[j].eq(Mux(pop_en, nxt[1, 0], nxt[0, 0]))
                else:
                    m.d.sync += flags[j].eq(Mux(pop_en, Mux(late, nxt[1, 1], nxt[1, 0]),
                                                Mux(late, nxt[0, 1], nxt[0, 0])))
            for k in range(depth):
                self.register_copies.append(
                    (f"{bank}: {name}{k} copies its compare", Const(0, 1),
                     (res_q.level > k) & (ents[k].kind == KIND_DUP)
                     & (flags[k] != compare(ents[k].ord))))
            return flags

        # fwd_ok: ord >= fwd_lo (take_ok). fwd_lo moves (up, or to 0) with fwd_step.
        # (timing: its next value is one register, fwd_cnt, not a clear flag ORed into every
        # entry's flag: that flag, the retire beat's `last`, reached ~240 flip-flops)
        def fwd_next(o):                     # ord >= fwd_lo's next value, when it steps
            return o >= self.fwd_cnt
        fwd_ok = entry_flags(
            "fwd_ok",
            lambda f, o, l: fwd_next(o) if l else f,
            lambda l: fwd_next(b4_ord) if l else b4_ord >= self.fwd_lo,
            lambda o: o >= self.fwd_lo,
            late=self.fwd_step)
        # in_ram: ord < drained (the resolver). drained steps by one with `drain`.
        # Pushed now: B4's ordinal < drained + drain (this cycle's step), where drained =
        # B3's drained + B3's drain; B3 registers its ordinal's compares with B3's
        # drained + 0, 1, 2 (`b4_ic`) and its drain (`b4_drain`).
        b4_ic = Signal(3, reset_less=True)
        b4_drain = Signal()
        m.d.sync += [b4_ic.eq(Cat(*[b3_ord < drained + k for k in range(3)])),
                     b4_drain.eq(drain)]
        in_ram_f = entry_flags(
            "in_ram",
            lambda f, o, l: f | (drain & (o == drained)),
            lambda l: Array([b4_ic[0], b4_ic[1], b4_ic[1], b4_ic[2]])[Cat(drain, b4_drain)],
            lambda o: o < drained)
        # known: ord < pushed (the resolver). pushed moves up by wq.push_n with wq.push_en.
        # Its next value is compared through registers `pushed_plus[n]` = pushed + n: an
        # ordinal is compared with each of them, push_n (a register of the fragmenter)
        # selects a compare (timing: the adder pushed + push_n ahead of the compares made
        # the flags' longest path, 17-18 levels from push_n).
        pushed = Signal(range(geo.entries + 1))
        pushed_up = pushed + wq.push_n
        pushed_plus = [None] + [Signal(range(geo.entries + 2 * L + 1), init=n,
                                       name=f"pushed_plus{n}")
                                for n in range(1, 2 * L + 1)]
        for n in range(1, 2 * L + 1):
            m.d.sync += pushed_plus[n].eq(Mux(wq.push_en, pushed_up + n, pushed_plus[n]))
            self.register_copies.append(
                (f"{bank}: pushed_plus{n} = pushed + {n}", pushed + n, pushed_plus[n]))

        def pushed_now(o):                   # ord < pushed + push_n (if pushed now)
            return Array([Const(0, 1)] + [o < pushed_plus[n]
                                          for n in range(1, L + 1)])[wq.push_n]
        # Pushed now: B4's ordinal < pushed + push_n (if push_en), where pushed = B3's
        # pushed + B3's step (`b4_step`: push_n if push_en); B3 registers its ordinal's
        # compares with B3's pushed + 0 .. 2L (`b4_kc`, through pushed_plus). `b4_kc` is
        # monotone (o < p + k implies o < p + k + 1), so the flag is bit step + push_n.
        b4_kc = Signal(2 * L + 1, reset_less=True)
        b4_step = Signal(range(L + 1))
        m.d.sync += [
            b4_kc.eq(Cat(b3_ord < pushed, *[b3_ord < pushed_plus[n]
                                            for n in range(1, 2 * L + 1)])),
            b4_step.eq(Mux(wq.push_en, wq.push_n, 0)),
        ]
        def known_push(l):                   # (l: pushed now)
            return Array([Array([b4_kc[d + n] for n in range(L + 1)])
                          for d in range(L + 1)])[b4_step][wq.push_n if l else 0]
        known_f = entry_flags(
            "known",
            lambda f, o, l: f | pushed_now(o) if l else f,
            known_push,
            lambda o: o < pushed,
            late=wq.push_en)

        # --- resolver ------------------------------------------------------------------------
        # `pushed` counts the values pushed into wq (drained + wq.level), so whether a DUP's
        # value is known (ord < pushed) and where it is (ord < drained: RAM) are two flags
        # of the entry (above), selected by rptr (timing: rptr only drives muxes). The next
        # rptr is chosen among values precomputed from rptr alone, by adv, by res_q.pop_n
        # (a register of the fragmenter) and by res_q.pop_en (its take, the latest signal)
        # last.
        rptr = Signal(range(geo.res_depth + 1))
        r_wait = Signal()                    # the RAM is being read for the DUP at rptr
        r_req = Signal()                     # ... the read was asked for (r_wait if it stays)
        # `stays`: the entry at rptr of the last cycle was not popped, so it is now at the
        # place the registered update and r_wait use. A register of its own (timing: the
        # resolver's decision, from rptr through the entry's flags, and the fragmenter's
        # take, the latest signal of the bank, meet only in the AND of two flip-flops
        # here, not in one cone of logic that placement has to put near both)
        stays = Signal()
        m.d.sync += pushed.eq(Mux(wq.push_en, pushed_up, pushed))
        e = res_q.at(rptr)
        adv = Signal()
        # nxt[a][p]: rptr + a - p, at least 0
        nxt = [Array([Mux(rptr + a > p, (rptr + a - Const(p, len(rptr)))[:len(rptr)], 0)
                      for p in range(L + 1)]) for a in (0, 1)]
        m.d.sync += rptr.eq(Mux(pop_en, Mux(adv, nxt[1][pop], nxt[0][pop]),
                                Mux(adv, (rptr + 1)[:len(rptr)], rptr)))
        m.d.sync += [r_req.eq(0), stays.eq(~pop_en | (rptr >= pop))]
        m.d.comb += r_wait.eq(r_req & stays)
        rvalue = Signal(geo.value_bits)      # the index found for the DUP at rptr
        upd = Signal()                       # ... found this cycle
        # The update is written into res_q a cycle later, from registers: the resolver's
        # decision (rptr -> entry flags -> found) does not also drive the
        # update muxes of every res_q entry. The place is the one after this cycle's pop;
        # an entry popped now loses its update (the fragmenter took it with a forwarded
        # index). An entry gains `resolved` a cycle later than the resolver finds it; the
        # resolver has moved past it by then.
        u_val = Signal(geo.value_bits)
        u_found = Signal()                   # upd, registered (res_q.upd_en if it stays)
        m.d.sync += [
            u_found.eq(upd),
            res_q.upd_off.eq(Mux(pop_en, nxt[0][pop], rptr)),
            u_val.eq(rvalue),
        ]
        m.d.comb += res_q.upd_en.eq(u_found & stays)
        m.d.comb += res_q.upd_data.eq(Cat(Const(0, rl["resolved"].offset), Const(1, 1), u_val))
        # The resolver's decision is made for every entry side by side, from its flags, its
        # place (k < level, k < head_need: compares of registers with constants), and only
        # then selected by rptr (timing: rptr selected three flags first and compared itself
        # with the level and head_need after, seven logic levels to u_found, 12.4 ns on
        # `ulx3s`). The value is chosen by r_wait alone: it matters only with `upd`.
        # dec_adv[k]: pass entry k; dec_upd[k]: found (its value is in wq); dec_req[k]: read
        # its value from the index RAM (the read answers next cycle; not if the fragmenter
        # pops the entry now: it may take a DUP forwarded from its own pipeline).
        dec_adv, dec_upd, dec_req = [], [], []
        for k, ek in enumerate(ents):
            here = Signal(name=f"b{self.index}_r_here{k}")
            done = Signal(name=f"b{self.index}_r_done{k}")
            m.d.comb += [here.eq(res_q.level > k),
                         done.eq((ek.kind != KIND_DUP) | ek.resolved)]
            # wq restarts with the mini-batch and takes one value per ordinal, in order. A
            # DUP whose NEW has not retired and leaves with the fragmenter's next beat (it is
            # among the first head_need results), which forwards the index, is passed: else
            # the entries behind it in the same beat would wait for the resolver while the
            # beat waits for them
            dec_upd.append(here & ~done & ~in_ram_f[k] & known_f[k])
            dec_req.append(here & ~done & in_ram_f[k])
            passing = (self.head_need > k) if k < L else Const(0, 1)     # head_need <= L
            dec_adv.append(here & (done | (~in_ram_f[k] & (known_f[k] | passing))))
        rsel = rptr[:ceil_log2(geo.res_depth)]
        r_in = ~rptr[-1] if geo.res_depth == 1 << len(rsel) else rptr < geo.res_depth
        # the index RAM is read at the entry's ordinal every cycle; used after `dec_req`
        m.d.comb += ir.addr.eq(e.ord)
        m.d.comb += rvalue.eq(Mux(r_wait, ir.data, wq.at_slot(e.ord)))
        with m.If(r_wait):
            m.d.comb += [upd.eq(1), adv.eq(1)]
        with m.Elif(r_in):
            m.d.comb += [upd.eq(Array(dec_upd)[rsel]), adv.eq(Array(dec_adv)[rsel])]
            m.d.sync += r_req.eq(Array(dec_req)[rsel])

        # --- take_ok: the entries that may leave, for the places after this cycle's pop ----
        nq = min(geo.res_depth, 2 * L)      # places k + pop: k < L, pop <= L
        okx = []
        for k in range(nq):
            ek = ents[k]
            okx.append((res_q.level > k) & ((ek.kind != KIND_DUP) | ek.resolved | fwd_ok[k]))
        cands = []
        for p in range(L + 1):
            bits, acc = [], Const(1, 1)
            for k in range(L):
                acc = acc & (okx[k + p] if k + p < nq else Const(0, 1))
                bits.append(acc)
            cands.append(Cat(*bits))
        take_pop = Array(cands)[pop]
        m.d.sync += self.take_ok.eq(Mux(pop_en, take_pop, cands[0]))

        m.d.comb += [self.ok_pop.eq(need_bit(take_pop, self.need_pop)),
                     self.ok_keep.eq(need_bit(cands[0], self.need_keep))]

        # --- mini-batch boundary -----------------------------------------------------------
        with m.If(restart):
            m.d.sync += [touched.eq(0), newcnt.eq(0), drained.eq(0), pushed.eq(0), rptr.eq(0),
                         u_found.eq(0)]
            m.d.sync += [pushed_plus[n].eq(n) for n in range(1, 2 * L + 1)]

        m.d.comb += self.idle.eq((in_q.level == 0) & ~b1_valid & ~b2_valid & ~b3_valid
                                 & ~b4_valid
                                 & ~w1_valid
                                 & (res_q.level == 0) & (wq.level == 0))
        return m
