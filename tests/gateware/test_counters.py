"""AccessCounterArray (gateware) against the golden CounterArray / HotlineModel learning.

Every test pairs ``rtl_counters()`` (an amaranth.sim run of the component that streams
lookups, with random idle cycles, pulses ``start`` and reads every set back) with
``ref_counters()`` (the golden :class:`HotlineModel` learning phase) and compares
``(valid, key, count)`` of every way of every set, and the statistics, exactly.
"""

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.sim import Simulator

from golden.counters import CounterArray
from golden.model import HotlineModel
from hotline_hw.config import preset
from hotline_hw.gateware.counters import READ_LATENCY, AccessCounterArray
from hotline_hw.hashing import SEED_COUNTER, h3_np
from sim.register_copies import watch_register_copies

# Two array sizes; the small one has 3-bit counters, so hot keys saturate.
SIZES = {
    "16x4b2": dict(counter_sets=16, counter_ways=4, counter_banks=2, counter_bits=3),
    "64x8b4": dict(counter_sets=64, counter_ways=8, counter_banks=4, counter_bits=8),
}
LANES = [1, 2, 4]


def make_cfg(lanes=2, size="16x4b2", **changes):
    """The ``tiny`` preset (2-bit table ids, 10-bit rows, 3 tables: table 3 is bad)."""
    return preset("tiny", lanes=lanes, **{**SIZES[size], **changes})


# --- keys ------------------------------------------------------------------------------
class Keys:
    """Good keys of a config grouped by set, and bad keys."""

    def __init__(self, cfg):
        self.cfg = cfg
        allkeys = np.arange(1 << cfg.key_bits, dtype=np.uint64)
        good = allkeys[(allkeys >> np.uint64(cfg.row_bits)) < np.uint64(cfg.num_tables)]
        self.good = good
        self.bad = allkeys[(allkeys >> np.uint64(cfg.row_bits)) >= np.uint64(cfg.num_tables)]
        sets = h3_np(good, SEED_COUNTER, cfg.key_bits, cfg.counter_set_bits)
        self.by_set = [good[sets == s] for s in range(cfg.counter_sets)]

    def bank_of(self, s):
        return s % self.cfg.counter_banks

    def in_set(self, s, n):
        return [int(k) for k in self.by_set[s][:n]]

    def in_bank(self, rng, bank):
        """A random good key of a random set of ``bank``."""
        banks = self.cfg.counter_banks
        s = bank + banks * int(rng.integers(self.cfg.counter_sets // banks))
        return int(rng.choice(self.by_set[s]))


def set_of(cfg, key):
    return int(h3_np(np.array([key], dtype=np.uint64), SEED_COUNTER, cfg.key_bits,
                     cfg.counter_set_bits)[0])


def random_minibatches(cfg, rng, n, max_len):
    """Mini-batches mixing: a pool a few keys larger than the ways of a quarter of the sets
    (fills, full-set replacements, ties), a Zipf-ish stream, bad keys and uniform keys."""
    keys = Keys(cfg)
    n_hot = max(min(2, cfg.counter_sets), cfg.counter_sets // 4)
    hot_sets = rng.choice(cfg.counter_sets, size=n_hot, replace=False)
    pool = np.concatenate([keys.by_set[s][:cfg.counter_ways + 2] for s in hot_sets])
    zipf = rng.permutation(keys.good)[:4 * cfg.counter_sets * cfg.counter_ways]
    out = []
    for _ in range(n):
        length = int(rng.integers(0, max_len + 1)) if rng.random() < 0.9 else 0
        mb = []
        for _ in range(length):
            r = rng.random()
            if r < 0.45:
                mb.append(int(rng.choice(pool)))
            elif r < 0.8:
                mb.append(int(zipf[min(int(rng.zipf(1.3)) - 1, len(zipf) - 1)]))
            elif r < 0.9:
                mb.append(int(rng.choice(keys.bad)))
            else:
                mb.append(int(rng.choice(keys.good)))
        out.append(mb)
    return out


def to_beats(cfg, minibatches, rng=None, hole_prob=0.0):
    """Beats ``(keys, keep, last)`` carrying the mini-batches in stream order; with
    ``hole_prob`` some lanes are left empty (holding a garbage key)."""
    lanes = cfg.lanes
    beats = []
    for mb in minibatches:
        i, first = 0, True
        while i < len(mb) or first:
            first = False
            keys = [int(rng.integers(1 << cfg.key_bits)) if rng is not None else 0
                    for _ in range(lanes)]
            keep = 0
            for lane in range(lanes):
                if i < len(mb) and not (rng is not None and rng.random() < hole_prob):
                    keys[lane] = mb[i]
                    keep |= 1 << lane
                    i += 1
            beats.append((keys, keep, 0))
        beats[-1] = (beats[-1][0], beats[-1][1], 1)
    return beats


def beats_to_minibatches(beats):
    mbs, cur = [], []
    for keys, keep, last in beats:
        cur += [k for lane, k in enumerate(keys) if keep >> lane & 1]
        if last:
            mbs.append(cur)
            cur = []
    assert not cur
    return mbs


# --- the golden reference ----------------------------------------------------------------
def ref_counters(cfg, phases):
    """Golden learning: each phase (a list of mini-batches) starts with LEARN (clear).
    Returns per phase ``(state, (sampled, learned, minibatches))``."""
    model = HotlineModel(cfg)
    out = []
    for mbs in phases:
        model.start_learning()
        learned0 = model.totals.learned_lookups
        for mb in mbs:
            model.minibatch(np.array(mb, dtype=np.uint64), [len(mb)], learn=True, train=False)
        out.append((model.counters.state(),
                    (model.sampled, model.totals.learned_lookups - learned0, len(mbs))))
    return out


class BeatReplay:
    """The golden learning rules applied beat by beat (for reads in mid-stream): the state
    after a prefix of the beats of a phase. Agrees with :class:`HotlineModel` at mini-batch
    boundaries (checked by the tests that use it)."""

    def __init__(self, cfg, beats):
        self.cfg, self.beats = cfg, beats
        self.arr = CounterArray(cfg)
        self.done = 0
        self.n = 0
        self.sampled = 0

    def advance(self, upto):
        cfg = self.cfg
        while self.done < upto:
            keys, keep, last = self.beats[self.done]
            self.done += 1
            sampled = self.n % cfg.learn_period == 0
            if sampled:
                ks = [k for lane, k in enumerate(keys)
                      if keep >> lane & 1 and k >> cfg.row_bits < cfg.num_tables]
                self.arr.update(np.array(ks, dtype=np.uint64))
            if last:
                if sampled:
                    self.sampled += 1
                    if cfg.aging_period and self.sampled % cfg.aging_period == 0:
                        self.arr.age()
                self.n += 1
        return self.arr.state()


# --- the RTL run -----------------------------------------------------------------------
def decode_set(cfg, word):
    """``[(valid, key, count)] * ways`` from the integer value of a set."""
    kb, cb = cfg.key_bits, cfg.counter_bits
    e = 1 + kb + cb
    out = []
    for w in range(cfg.counter_ways):
        bits = word >> (w * e)
        out.append((bits & 1, (bits >> 1) & ((1 << kb) - 1), (bits >> (1 + kb)) & ((1 << cb) - 1)))
    return out


def pack_beat(cfg, keys, keep, last):
    kb, lanes = cfg.key_bits, cfg.lanes
    v = 0
    for i, k in enumerate(keys):
        v |= (k & ((1 << kb) - 1)) << (i * kb)
    return v | keep << (lanes * kb) | last << (lanes * kb + lanes)


class RtlRun:
    """What ``rtl_counters`` saw."""

    def __init__(self):
        self.states = []        # per phase: list of sets, each [(valid, key, count)] * ways
        self.stats = []         # per phase: (sampled, learned, minibatches)
        self.reads = []         # mid-stream reads: (phase, beats accepted before, set, set value)
        self.accept_cycles = []  # per phase: cycle of each beat's handshake
        self.busy_cycles = []   # per phase: cycles with busy high
        self.stall_cycles = []  # per phase: cycles with valid high and ready low
        self.cycles = 0


def rtl_counters(cfg, phases, *, learn_period=None, seed=0, idle_prob=0.0,
                 resp_ready_prob=1.0, read_prob=0.0, start_first=True, abrupt=(), window=2):
    """Run the component on ``phases`` (each a list of beats). Each phase but the first (and
    the first if ``start_first``) begins with a ``start`` pulse; phases whose index is in
    ``abrupt`` begin while the previous one is still in flight, after a random part of its
    beats. After each phase (unless cut short) every set is read back."""
    rng = np.random.default_rng(seed)
    dut = AccessCounterArray(cfg, window=window)
    lv = dut.lookups
    payload = lv.payload.as_value()
    rq, rs = dut.read_req, dut.read_resp
    rs_payload = rs.payload.as_value()
    run = RtlRun()
    lp = cfg.learn_period if learn_period is None else learn_period
    sets = cfg.counter_sets

    async def testbench(ctx):
        cycle = 0
        ctx.set(dut.learn_period, lp)
        for ph, beats in enumerate(phases):
            cut = len(beats)
            if ph + 1 in abrupt:
                cut = int(rng.integers(0, len(beats) + 1))
            if ph > 0 or start_first:
                ctx.set(dut.start, 1)
            accepts, busy, stalls = [], 0, 0
            bi, gap = 0, 0
            req = None                # set index of the read request on the wire
            queue = []                # (beats before, set) of accepted reads, response due
            final = {}                # set -> value of the final read-back
            reading_all = False
            next_set = 0
            streamed = False          # the last beat was accepted at an earlier edge
            while True:
                valid = bi < cut and gap == 0
                ctx.set(lv.valid, valid)
                if valid:
                    ctx.set(payload, pack_beat(cfg, *beats[bi]))
                if req is None:
                    if reading_all and next_set < sets:
                        req = next_set
                        next_set += 1
                    elif not reading_all and bi < cut and rng.random() < read_prob:
                        req = int(rng.integers(sets))
                ctx.set(rq.valid, req is not None)
                if req is not None:
                    ctx.set(rq.payload, req)
                ctx.set(rs.ready, rng.random() < resp_ready_prob)
                (_, _, l_v, l_r, q_v, q_r, p_v, p_r, word, b, idle) = await ctx.tick().sample(
                    lv.valid, lv.ready, rq.valid, rq.ready, rs.valid, rs.ready, rs_payload,
                    dut.busy, dut.idle)
                ctx.set(dut.start, 0)
                cycle += 1
                busy += b
                stalls += l_v and not l_r
                if p_v and p_r:
                    before, s = queue.pop(0)
                    if before is None:
                        final[s] = word
                    else:
                        run.reads.append((ph, before, s, word))
                if q_v and q_r:
                    queue.append((None if reading_all else bi, req))
                    req = None
                if l_v and l_r:
                    bi += 1
                    accepts.append(cycle - 1)
                    while rng.random() < idle_prob:
                        gap += 1
                elif gap:
                    gap -= 1
                if bi == cut and req is None and not queue and not reading_all:
                    if cut < len(beats):
                        break         # cut short: the next phase starts now
                    if streamed and idle:
                        reading_all = True
                    streamed = True
                if reading_all and len(final) == sets:
                    break
            run.accept_cycles.append(accepts)
            run.busy_cycles.append(busy)
            run.stall_cycles.append(stalls)
            run.stats.append((ctx.get(dut.sampled), ctx.get(dut.learned), ctx.get(dut.minibatches)))
            run.states.append([decode_set(cfg, final[s]) for s in range(sets)] if final else None)
        run.cycles = cycle

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    watch_register_copies(sim, dut)
    sim.run()
    return run


def ref_dispatch(cfg, beats, window=2):
    """Cycle-exact model of the dispatcher for a stream that is always valid (no sweep, no
    read): the cycle of each beat's handshake, the first at cycle 0. Each cycle every bank
    takes the first pending lookup in stream order that maps to it; a beat is accepted in
    any cycle that ends with fewer than ``window`` beats holding undispatched lookups."""
    slots, cycles, cycle, nxt = [], [], 0, 0
    while nxt < len(beats):
        busy = set()
        for slot in slots:
            for i, bank in enumerate(slot):
                if bank is not None and bank not in busy:
                    busy.add(bank)
                    slot[i] = None
        slots = [sl for sl in slots if any(b is not None for b in sl)]
        if len(slots) < window:
            keys, keep, _ = beats[nxt]
            slots.append([set_of(cfg, k) % cfg.counter_banks for lane, k in enumerate(keys)
                          if keep >> lane & 1 and k >> cfg.row_bits < cfg.num_tables])
            cycles.append(cycle)
            nxt += 1
        cycle += 1
    return cycles


def assert_same_state(cfg, rtl_sets, ref_state, what=""):
    valid, keys, counts = ref_state
    for s in range(cfg.counter_sets):
        want = [(int(valid[s, w]), int(keys[s, w]), int(counts[s, w]))
                for w in range(cfg.counter_ways)]
        assert rtl_sets[s] == want, f"{what} set {s}: rtl {rtl_sets[s]} != golden {want}"


def check(cfg, beat_phases, run, *, cut=()):
    """Compare every phase that was read back with the golden model."""
    ref = ref_counters(cfg, [beats_to_minibatches(b) for b in beat_phases])
    for ph, ((state, stats), rtl_state, rtl_stats) in enumerate(zip(ref, run.states, run.stats)):
        if ph + 1 in cut:
            continue
        assert_same_state(cfg, rtl_state, state, f"phase {ph}")
        assert rtl_stats == stats, f"phase {ph}: (sampled, learned, minibatches)"
    return ref


def check_reads(cfg, beat_phases, run):
    """Mid-stream reads return the set after exactly the beats accepted before the read."""
    assert run.reads
    for ph, beats in enumerate(beat_phases):
        replay = BeatReplay(cfg, beats)
        for _, before, s, word in sorted(r for r in run.reads if r[0] == ph):
            valid, keys, counts = replay.advance(before)
            want = [(int(valid[s, w]), int(keys[s, w]), int(counts[s, w]))
                    for w in range(cfg.counter_ways)]
            assert decode_set(cfg, word) == want, f"read of set {s} after {before} beats"
        # the replay agrees with the golden model at the end of the phase
        ref = ref_counters(cfg, [beats_to_minibatches(beats)])[0][0]
        end = replay.advance(len(beats))
        assert all(np.array_equal(a, b) for a, b in zip(end, ref))


# --- random streams against the golden model ------------------------------------------------
@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("lanes", LANES)
def test_random_stream(lanes, size):
    cfg = make_cfg(lanes, size)
    rng = np.random.default_rng(100 + lanes)
    n_lookups = 700 if size == "16x4b2" else 1000
    mbs = random_minibatches(cfg, rng, 24, 2 * n_lookups // 24)
    phases = [to_beats(cfg, mbs, rng, hole_prob=0.2)]
    run = rtl_counters(cfg, phases, seed=lanes, idle_prob=0.3, resp_ready_prob=0.6,
                       read_prob=0.1)
    check(cfg, phases, run)
    check_reads(cfg, phases, run)
    # the stream really exercised the corner cases: full sets, saturated counters
    valid, _, counts = ref_counters(cfg, [mbs])[0][0]
    assert valid.all(axis=1).sum() >= cfg.counter_sets // 4
    if size == "16x4b2":
        assert (counts == cfg.counter_max).any()


# --- corner cases ----------------------------------------------------------------------
def test_empty_full_ties_replacement():
    """One set filled way by way, then hits, ties and replacements; other sets empty."""
    cfg = make_cfg(1, "16x4b2")
    k = Keys(cfg).in_set(5, 8)
    mbs = [
        [],                                    # empty mini-batch: nothing changes
        k[:4],                                 # fill ways 0..3 (count 1 each: a 4-way tie)
        [k[4]],                                # full, tie: way 0 replaced, count 2
        [k[1], k[1], k[2], k[5]],              # way 3 (count 1) replaced -> 2
        [k[6], k[6], k[7]],                    # ties at 2: ways 0, then the lowest again
    ]
    phases = [to_beats(cfg, mbs)]
    run = rtl_counters(cfg, phases, idle_prob=0.5, seed=1)
    check(cfg, phases, run)
    assert sum(run.states[0][s][0][0] for s in range(cfg.counter_sets)) == 1


@pytest.mark.parametrize("lanes", [1, 4])
def test_saturation(lanes):
    cfg = make_cfg(lanes, "16x4b2", counter_bits=2)
    k = Keys(cfg).in_set(3, 6)
    # a hot key 20 times (saturates at 3), more keys saturating, then replacements of a
    # saturated minimum (all tie at 3: way 0 goes, and the newcomer gets min(3 + 1, 3))
    mbs = [[k[0]] * 20, k[1:4] * 5, [k[4]] * 2, [k[5]]]
    phases = [to_beats(cfg, mbs)]
    run = rtl_counters(cfg, phases)
    check(cfg, phases, run)
    assert run.states[0][3] == [(1, k[5], 3), (1, k[1], 3), (1, k[2], 3), (1, k[3], 3)]


def test_same_key_on_all_lanes():
    cfg = make_cfg(4, "64x8b4")
    keys = Keys(cfg)
    a, b = keys.in_set(7, 2)
    beats = [([a, a, a, a], 0b1111, 0), ([a, b, a, b], 0b1111, 0), ([b, a, b, b], 0b1011, 1)]
    for window in (1, 2):
        run = rtl_counters(cfg, [beats], start_first=False, window=window)
        check(cfg, [beats], run)
        # lanes of one bank are serialised, one per cycle
        acc = run.accept_cycles[0]
        assert [c - acc[0] for c in acc] == ref_dispatch(cfg, beats, window)
        assert acc[1] - acc[0] == (4 if window == 1 else 1)
        assert acc[2] - acc[1] == (4 if window == 1 else 3)


@pytest.mark.parametrize("pattern", ["same", "two_apart_same_bank", "two_apart_other_bank",
                                     "three_apart"])
def test_forwarding(pattern):
    """Lookups of one set in consecutive cycles, and 2 / 3 cycles apart with another row of
    the same bank or another bank in between: one lookup per cycle, no stall, exact state."""
    cfg = make_cfg(1, "64x8b4", counter_bits=3)
    keys = Keys(cfg)
    s = 8                                   # bank 0
    a = keys.in_set(s, 12)                  # more keys than ways: replacements
    other_row = keys.in_set(s + cfg.counter_banks, 2)    # bank 0, another row
    other_bank = keys.in_set(s + 1, 2)                   # bank 1
    rng = np.random.default_rng(7)
    seq = []
    for i in range(60):
        x = a[int(rng.integers(len(a)))] if rng.random() < 0.6 else a[i % 3]
        if pattern == "same":
            seq.append(x)
        elif pattern == "two_apart_same_bank":
            seq += [x, other_row[i % 2]]
        elif pattern == "two_apart_other_bank":
            seq += [x, other_bank[i % 2]]
        else:
            seq += [x, other_row[i % 2], other_bank[i % 2]]
    beats = to_beats(cfg, [seq[:len(seq) // 2], seq[len(seq) // 2:]])
    run = rtl_counters(cfg, [beats])
    check(cfg, [beats], run)
    acc = run.accept_cycles[0]
    assert acc == list(range(acc[0], acc[0] + len(beats))), "the input stalled"


def test_lanes_same_bank_keep_order():
    """Several lanes of one beat in the same full set: the outcome depends on the order."""
    cfg = make_cfg(4, "16x4b2")
    keys = Keys(cfg)
    k = keys.in_set(2, 8)
    rng = np.random.default_rng(3)
    mbs = [[k[int(i)] for i in rng.integers(0, 8, size=40)] for _ in range(4)]
    phases = [to_beats(cfg, mbs, rng, hole_prob=0.25)]
    run = rtl_counters(cfg, phases, idle_prob=0.2, seed=3)
    check(cfg, phases, run)


def test_bad_keys_and_keep():
    cfg = make_cfg(4, "16x4b2")
    keys = Keys(cfg)
    rng = np.random.default_rng(5)
    bad = [int(x) for x in rng.choice(keys.bad, size=30)]
    good = [int(x) for x in rng.choice(keys.good, size=10)]
    mbs = [bad[:10] + good[:5] + bad[10:20], good[5:] + bad[20:]]
    phases = [to_beats(cfg, mbs, rng, hole_prob=0.4)]   # garbage keys in empty lanes
    run = rtl_counters(cfg, phases)
    check(cfg, phases, run)
    assert run.stats[0][1] == 10


@pytest.mark.parametrize("learn_period", [1, 3])
def test_sampling(learn_period):
    cfg = make_cfg(2, "16x4b2", learn_period=learn_period)
    rng = np.random.default_rng(learn_period)
    mbs = random_minibatches(cfg, rng, 11, 20)
    mbs[4] = []                              # keep == 0, last == 1 beats count as well
    phases = [to_beats(cfg, mbs, rng, hole_prob=0.2)]
    run = rtl_counters(cfg, phases, idle_prob=0.3, seed=learn_period)
    check(cfg, phases, run)
    assert run.stats[0][0] == len(range(0, 11, learn_period))
    assert run.stats[0][2] == 11


def test_learn_period_zero_acts_as_one():
    cfg = make_cfg(2, "16x4b2")
    rng = np.random.default_rng(9)
    phases = [to_beats(cfg, random_minibatches(cfg, rng, 4, 12))]
    run = rtl_counters(cfg, phases, learn_period=0)
    check(cfg, phases, run)


@pytest.mark.parametrize("aging_period,learn_period", [(1, 1), (2, 1), (2, 3)])
def test_aging(aging_period, learn_period):
    cfg = make_cfg(2, "64x8b4", aging_period=aging_period, learn_period=learn_period)
    rng = np.random.default_rng(aging_period * 10 + learn_period)
    mbs = random_minibatches(cfg, rng, 9, 24)
    phases = [to_beats(cfg, mbs, rng, hole_prob=0.2)]
    run = rtl_counters(cfg, phases, idle_prob=0.2, seed=4, start_first=False)
    check(cfg, phases, run)
    rows = cfg.counter_sets // cfg.counter_banks
    agings = len(range(0, 9, learn_period)) // aging_period
    # busy: from the beat that triggers aging (while its lanes dispatch) to the last row
    assert agings * rows <= run.busy_cycles[0] <= agings * (rows + cfg.lanes)


def test_aging_cost():
    """A continuous stream (one lookup per cycle): each aging stalls the input R cycles."""
    cfg = make_cfg(1, "64x8b4", aging_period=1)
    rng = np.random.default_rng(21)
    keys = Keys(cfg)
    mbs = [[int(k) for k in rng.choice(keys.good, size=10)] for _ in range(5)]
    phases = [to_beats(cfg, mbs)]
    run = rtl_counters(cfg, phases, start_first=False)
    check(cfg, phases, run)
    rows = cfg.counter_sets // cfg.counter_banks
    assert run.stall_cycles[0] == 4 * rows         # the 5th aging has no beat behind it
    assert run.busy_cycles[0] == 5 * (rows + 1)    # + the cycle the trigger lookup dispatches


def test_start_clears():
    """Three phases: after a full read-back; in mid-stream (a beat held, the pipeline full);
    each phase must equal a golden phase that starts from a clear array."""
    cfg = make_cfg(4, "16x4b2", aging_period=2)
    rng = np.random.default_rng(11)
    phases = [to_beats(cfg, random_minibatches(cfg, rng, 6, 30), rng, hole_prob=0.1)
              for _ in range(3)]
    run = rtl_counters(cfg, phases, seed=11, abrupt=(2,))
    check(cfg, phases, run, cut=(2,))
    rows = cfg.counter_sets // cfg.counter_banks
    # the clear, then 3 agings (each also while the lanes of its trigger beat dispatch)
    assert 4 * rows <= run.busy_cycles[2] <= 4 * rows + 3 * cfg.lanes
    # without a start pulse after reset the array starts empty as well
    run = rtl_counters(cfg, phases[:1], seed=12, start_first=False)
    check(cfg, phases[:1], run)
    assert 3 * rows <= run.busy_cycles[0] <= 3 * (rows + cfg.lanes)


def test_clear_cost_and_busy():
    cfg = make_cfg(2, "64x8b4")
    rows = cfg.counter_sets // cfg.counter_banks
    run = rtl_counters(cfg, [to_beats(cfg, [[1, 2, 3]])])
    assert run.busy_cycles[0] == rows
    # the first beat is accepted right after the sweep: start at cycle 0, rows at 1..R,
    # ready again in cycle R
    assert run.accept_cycles[0][0] == rows


def test_latency():
    """Documented latencies: a lookup accepted in cycle 0 leaves ``idle`` low in cycles
    1..6; a read accepted in cycle t answers in cycle t + READ_LATENCY (5); reads stream
    one per cycle."""
    cfg = make_cfg(1, "64x8b4")
    k = Keys(cfg).in_set(5, 1)[0]
    dut = AccessCounterArray(cfg)
    rq, rs = dut.read_req, dut.read_resp
    log = {"idle": [], "req": [], "resp": []}

    async def testbench(ctx):
        ctx.set(dut.learn_period, 1)
        ctx.set(dut.lookups.valid, 1)
        ctx.set(dut.lookups.payload.as_value(), pack_beat(cfg, [k], 1, 1))
        _, _, ready = await ctx.tick().sample(dut.lookups.ready)
        assert ready
        ctx.set(dut.lookups.valid, 0)
        for _ in range(7):                              # cycles 1..7
            _, _, idle = await ctx.tick().sample(dut.idle)
            log["idle"].append(idle)
        ctx.set(rs.ready, 1)
        todo = [5] + list(range(8))
        for cycle in range(8, 24):
            ctx.set(rq.valid, bool(todo))
            if todo:
                ctx.set(rq.payload, todo[0])
            _, _, q, p_v, word = await ctx.tick().sample(rq.ready, rs.valid,
                                                         rs.payload.as_value())
            if q and todo:
                log["req"].append((cycle, todo.pop(0)))
            if p_v:
                log["resp"].append((cycle, decode_set(cfg, word)[0]))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    assert log["idle"] == [0, 0, 0, 0, 0, 0, 1]
    assert [c for c, _ in log["req"]] == list(range(8, 17))        # one read per cycle
    assert READ_LATENCY == 5
    assert [c for c, _ in log["resp"]] == list(range(13, 22))      # 5 cycles later
    assert log["resp"][0][1] == (1, k, 1)



def test_read_right_behind_lookups():
    """A read accepted as soon as the window empties follows the last lookup of its set one
    cycle behind, so it takes that lookup's result by forwarding (S3 -> S2), and the ones
    before through ``lw`` / memory: it returns the set as updated by every lookup."""
    cfg = make_cfg(1, "64x8b4")
    k0, k1, k2 = Keys(cfg).in_set(5, 3)
    seq = [k0, k0, k1, k0, k2, k1, k0]
    dut = AccessCounterArray(cfg)
    rq, rs = dut.read_req, dut.read_resp
    log = {"accept": [], "req": None, "resp": None}

    async def testbench(ctx):
        ctx.set(dut.learn_period, 1)
        ctx.set(rs.ready, 1)
        ctx.set(rq.payload, 5)
        todo = list(seq)
        for cycle in range(20):
            ctx.set(dut.lookups.valid, bool(todo))
            if todo:
                ctx.set(dut.lookups.payload.as_value(),
                        pack_beat(cfg, [todo[0]], 1, int(len(todo) == 1)))
            ctx.set(rq.valid, not todo and log["req"] is None)
            _, _, ready, q, p_v, word = await ctx.tick().sample(
                dut.lookups.ready, rq.ready, rs.valid, rs.payload.as_value())
            if todo and ready:
                log["accept"].append(cycle)
                todo.pop(0)
            elif q and log["req"] is None and not todo:
                log["req"] = cycle
            if p_v and log["resp"] is None:
                log["resp"] = (cycle, decode_set(cfg, word))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    assert log["accept"] == list(range(len(seq)))          # one lookup per cycle
    last = log["accept"][-1]
    assert log["req"] == last + 2       # the cycle after its dispatch empties the window
    assert log["resp"][0] == log["req"] + READ_LATENCY
    ways = sorted((e for e in log["resp"][1] if e[0]), key=lambda e: e[1])
    assert ways == sorted([(1, k0, 4), (1, k1, 2), (1, k2, 1)], key=lambda e: e[1])

# --- throughput ------------------------------------------------------------------------------
@pytest.mark.parametrize("lanes,size", [(l, s) for s in SIZES for l in LANES
                                        if l <= SIZES[s]["counter_banks"]])
def test_throughput_no_conflict(lanes, size):
    """Keys of one beat in distinct banks: one beat per cycle."""
    cfg = make_cfg(lanes, size)
    keys = Keys(cfg)
    rng = np.random.default_rng(lanes)
    banks = cfg.counter_banks
    beats = []
    for j in range(60):
        ks = [keys.in_bank(rng, (j + i) % banks) for i in range(lanes)]
        beats.append((ks, (1 << lanes) - 1, int(j % 10 == 9)))
    run = rtl_counters(cfg, [beats], start_first=False)
    check(cfg, [beats], run)
    acc = run.accept_cycles[0]
    assert acc == list(range(acc[0], acc[0] + len(beats)))
    assert run.stall_cycles[0] == 0


@pytest.mark.parametrize("window", [1, 2])
@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("lanes", LANES)
def test_throughput_random(lanes, size, window):
    """Random good keys, full beats: every handshake in the cycle the dispatcher model
    predicts; the lookups per cycle are reported."""
    cfg = make_cfg(lanes, size)
    keys = Keys(cfg)
    rng = np.random.default_rng(lanes)
    n = 120
    beats = [([int(k) for k in rng.choice(keys.good, size=lanes)], (1 << lanes) - 1, 0)
             for _ in range(n)]
    beats[-1] = (beats[-1][0], beats[-1][1], 1)
    run = rtl_counters(cfg, [beats], start_first=False, window=window)
    check(cfg, [beats], run)
    acc = run.accept_cycles[0]
    assert [c - acc[0] for c in acc] == ref_dispatch(cfg, beats, window)
    rate = n * lanes / (acc[-1] - acc[0] + 1)
    print(f"\nthroughput lanes={lanes} {size} ({cfg.counter_banks} banks) window={window}: "
          f"{rate:.2f} lookups/cycle")
    assert rate >= min(lanes, cfg.counter_banks) * (0.4 if window == 1 else 0.55)


# --- Verilog ------------------------------------------------------------------------------
@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("lanes", LANES)
def test_verilog(lanes, size):
    cfg = make_cfg(lanes, size, aging_period=2)
    text = verilog.convert(AccessCounterArray(cfg), name="counters")
    assert "module counters" in text


def test_bad_arguments():
    with pytest.raises(TypeError, match=r"^AccessCounterArray: cfg must be a HotlineConfig, "
                                        r"not \{'lanes': 2\}$"):
        AccessCounterArray({"lanes": 2})
    with pytest.raises(ValueError, match=r"^AccessCounterArray: window must be an integer "
                                         r"in 1\.\.4, not 0$"):
        AccessCounterArray(make_cfg(), window=0)


@pytest.mark.parametrize("shape", [dict(counter_sets=2, counter_banks=2, counter_ways=1),
                                   dict(counter_sets=1, counter_banks=1, counter_ways=3),
                                   dict(counter_sets=8, counter_banks=8, counter_ways=3)])
def test_degenerate_shapes(shape):
    """One way, one set, one row per bank (zero-width row and set indices)."""
    cfg = preset("tiny", lanes=2, counter_bits=3, aging_period=3, **shape)
    rng = np.random.default_rng(31)
    phases = [to_beats(cfg, random_minibatches(cfg, rng, 6, 12), rng, hole_prob=0.2)]
    run = rtl_counters(cfg, phases, idle_prob=0.2, read_prob=0.1, resp_ready_prob=0.7)
    check(cfg, phases, run)
    verilog.convert(AccessCounterArray(cfg), name="counters")
