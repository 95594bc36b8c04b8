"""cocotb testbench of :class:`hotline_hw.gateware.counters.AccessCounterArray` (unit
``counters``), on Icarus and Verilator, against the golden :class:`golden.model.HotlineModel`.

Run through :func:`sim.runner.run_cocotb` (``tests/sim/test_counters_cocotb.py``). Every test

1. resets the DUT and pulses ``start`` (the exported memories have no initial contents: X in
   Icarus, 0 in Verilator, so ``start``'s clear sweep is the protocol before learning);
2. drives the ``lookups`` stream (``rtl`` side) with beats of ``lanes`` keys, ``keep``
   marking the valid lanes (masked lanes carry garbage: hot keys and bad keys, which must be
   ignored) and ``last`` on the final beat of each mini-batch;
3. applies the same mini-batches to the golden model (``ref_learn``: ``start_learning``,
   then ``minibatch(keys, None, learn=True, train=False)`` each, which does the sampling,
   the bad-key filter and aging);
4. waits for ``idle``, reads the sets back through ``read_req`` / ``read_resp`` (random
   order, random idle cycles on the requests, random backpressure on the responses) and
   compares ``valid``/``key``/``count`` of every way, and ``sampled``/``learned``/
   ``minibatches``, with the golden model. The trace runs (``learn_trace``,
   ``learn_trace_period3``, ``start_mid_stream``) read EVERY set; the directed tests read
   the sets they touch and a random sample of the others (a full read of 1024 sets costs
   seconds on Icarus).

Sizes come from the environment (the pytest wrapper sets them per variant and simulator):

=============================  ==============================================  =========
variable                       meaning                                         default
=============================  ==============================================  =========
``HOTLINE_CNT_LOOKUPS``        lookups of the big ``learn_trace`` run           100000
``HOTLINE_CNT_LOOKUPS_P3``     lookups of the ``learn_period`` 3 run            30000
``HOTLINE_CNT_TPUT_LOOKUPS``   lookups of the ``throughput`` run                20000
``HOTLINE_CNT_MIN_LPC``        lookups per cycle ``throughput`` must reach      see below
=============================  ==============================================  =========

``throughput`` writes ``throughput.json`` (lookups, cycles, lookups per cycle) into the run
directory, for the pytest side to report.
"""

import json
import os
import random

import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from golden import synth
from golden.model import HotlineModel
from hotline_hw.hashing import SEED_COUNTER, h3_np
from sim.streams import StreamSink, StreamSource, load_config, reset, start_clock

# Mini-batches of 63 kaggle samples: 1638 lookups, not a multiple of 2 or 4 lanes, so the
# last beat of a mini-batch is partial; ~60 mini-batches per 100k lookups, enough for
# learn_period 3 and aging to matter.
BATCH_SIZE = 63
ZIPF = 1.1

_CFG = load_config() if os.environ.get("HOTLINE_CONFIG") else None


def _env_int(name, default):
    return int(os.environ.get(name, "") or default)


def _is_one(handle):
    return str(handle.value) == "1"


# --- golden side -------------------------------------------------------------------------

def ref_learn(cfg, minibatches, learn_period=1):
    """The golden learning phase: a fresh :class:`HotlineModel` whose LEARN_PERIOD is
    ``learn_period`` (0 acts as 1, as in the hardware), after ``start_learning`` and every
    mini-batch (a list of the keys whose ``keep`` bit was set, bad keys included)."""
    model = HotlineModel(cfg.replace(learn_period=max(1, learn_period)))
    model.start_learning()
    for mb in minibatches:
        model.minibatch(np.asarray(mb, dtype=np.uint64), None, learn=True, train=False)
    return model


def keys_by_set(cfg, rng, per_set=16):
    """``{set: [distinct good keys]}`` for every set, at least ``per_set`` keys each (random
    good keys, hashed with the array's H3)."""
    sets = cfg.counter_sets
    out = {s: [] for s in range(sets)}
    while min(len(v) for v in out.values()) < per_set:
        n = 8 * per_set * sets
        tables = rng.integers(cfg.num_tables, size=n, dtype=np.uint64)
        rows = rng.integers(1 << cfg.row_bits, size=n, dtype=np.uint64)
        keys = np.unique((tables << np.uint64(cfg.row_bits)) | rows)
        idx = h3_np(keys, SEED_COUNTER, cfg.key_bits, cfg.counter_set_bits)
        for k, s in zip(keys.tolist(), idx.tolist()):
            if len(out[s]) < per_set and k not in out[s]:
                out[s].append(k)
    return out


def bad_keys(cfg, rng, n):
    """``n`` bad keys: table id in ``[num_tables, 2**table_bits)``."""
    assert cfg.num_tables < (1 << cfg.table_bits), "the config has no bad table id"
    t = rng.integers(cfg.num_tables, 1 << cfg.table_bits, size=n, dtype=np.uint64)
    r = rng.integers(1 << cfg.row_bits, size=n, dtype=np.uint64)
    return ((t << np.uint64(cfg.row_bits)) | r).tolist()


def kaggle_batches(cfg, lookups, seed, *, bad_key_rate=0.01):
    """A kaggle-like synthetic trace of about ``lookups`` lookups as a list of mini-batches
    (``uint64`` key arrays)."""
    trace = synth.generate("kaggle", lookups=lookups, zipf=ZIPF, batch_size=BATCH_SIZE,
                           seed=seed, bad_key_rate=bad_key_rate, table_bits=cfg.table_bits)
    keys = trace.keys(cfg)
    off = trace.batch_lookup_offsets
    return [keys[off[b]:off[b + 1]] for b in range(trace.n_batches)]


class Beats:
    """Mini-batches cut into ``lookups`` beats.

    Each mini-batch's keys fill beats of ``lanes`` in order. With probability
    ``partial_prob`` a beat uses a random non-empty subset of the lanes (``keep`` not all
    ones); the last beat of a mini-batch holds what is left. With ``empty_last_prob`` a
    mini-batch ends with an extra ``keep == 0, last == 1`` beat; ``empty_mid_prob`` inserts
    ``keep == 0, last == 0`` beats; ``empty_batches`` inserts that many mini-batches made of
    one ``keep == 0, last == 1`` beat. Masked lanes carry garbage (hot keys of the mini-batch
    and bad keys). ``raws`` are the packed payloads, ``lanes_used`` the ``keep`` bits of
    each beat, ``minibatches`` the keys as the DUT must see them (the golden input).
    """

    def __init__(self, cfg, layout, batches, rng, *, partial_prob=0.0, empty_last_prob=0.0,
                 empty_mid_prob=0.0, empty_batches=0, garbage=None):
        self.cfg = cfg
        lanes = cfg.lanes
        full = (1 << lanes) - 1
        garbage = list(garbage or [])
        self.raws, self.lanes_used, self.last, self.minibatches = [], [], [], []
        self.beat_keys = []     # keys of the keep lanes of each beat

        def junk(kb):
            if garbage and rng.random() < 0.5:
                return rng.choice(garbage)
            return kb[rng.randrange(len(kb))] if kb else 0

        def emit(keys, mask, last, kb):
            lane_keys = [junk(kb) for _ in range(lanes)]
            j = 0
            for i in range(lanes):
                if mask >> i & 1:
                    lane_keys[i] = keys[j]
                    j += 1
            assert j == len(keys)
            self.raws.append(layout.pack({"keys": lane_keys, "keep": mask, "last": int(last)}))
            self.lanes_used.append(len(keys))
            self.last.append(bool(last))
            self.beat_keys.append(list(keys))

        batches = [np.asarray(b, dtype=np.uint64).tolist() for b in batches]
        empty_at = set(rng.sample(range(len(batches) + 1), min(empty_batches, len(batches) + 1)))
        for b, kb in enumerate(batches + [None]):
            if b in empty_at:
                emit([], 0, True, kb or [])
                self.minibatches.append([])
            if kb is None:
                break
            trailing_empty = rng.random() < empty_last_prob
            pos, n = 0, len(kb)
            while pos < n:
                if empty_mid_prob and rng.random() < empty_mid_prob:
                    emit([], 0, False, kb)
                if partial_prob and rng.random() < partial_prob:
                    mask = rng.randrange(1, full + 1)
                else:
                    mask = full
                sel = [i for i in range(lanes) if mask >> i & 1][:n - pos]
                mask = sum(1 << i for i in sel)
                emit(kb[pos:pos + len(sel)], mask, pos + len(sel) == n and not trailing_empty, kb)
                pos += len(sel)
            if trailing_empty or n == 0:
                emit([], 0, True, kb)
            self.minibatches.append(kb)

    def __len__(self):
        return len(self.raws)

    @property
    def lookups(self):
        return sum(self.lanes_used)

    def minibatches_from(self, first):
        """The mini-batches as the DUT groups beats ``first..``: after a ``start`` the
        first beats belong to a new mini-batch 0."""
        out, cur = [], []
        for keys, last in zip(self.beat_keys[first:], self.last[first:]):
            cur.extend(keys)
            if last:
                out.append(cur)
                cur = []
        assert not cur, "the stream must end with a last beat"
        return out


# --- the testbench -------------------------------------------------------------------------

class TB:
    def __init__(self, dut, *, idle=0.0):
        self.dut = dut
        self.cfg = load_config()
        self.log = dut._log
        start_clock(dut)
        dut.start.value = 0
        dut.learn_period.value = 1
        dut.read_req_valid.value = 0
        dut.read_resp_ready.value = 0
        self.lookups = StreamSource(dut, "lookups", dut.clk, idle_prob=idle)
        self.layout = self.lookups.layout
        self.rng = random.Random(random.getrandbits(32))
        self.np_rng = np.random.default_rng(random.getrandbits(32))

    @property
    def rows(self):
        return self.cfg.counter_sets // self.cfg.counter_banks

    async def reset(self):
        await reset(self.dut)

    async def start(self, learn_period=1):
        """Pulse ``start`` with LEARN_PERIOD ``learn_period``; wait for the clear sweep.
        Returns in a writable phase, right after a rising edge."""
        self.dut.learn_period.value = learn_period
        self.dut.start.value = 1
        await RisingEdge(self.dut.clk)
        self.dut.start.value = 0
        await self.wait_idle()

    async def wait_idle(self, limit=None):
        """Wait until ``idle`` is high; return the cycles waited (right after an edge)."""
        limit = limit or 4 * self.rows + 100_000
        for n in range(limit):
            await ReadOnly()
            if _is_one(self.dut.idle):
                await RisingEdge(self.dut.clk)
                return n
            await RisingEdge(self.dut.clk)
        raise AssertionError(f"idle did not rise within {limit} cycles")

    async def cycles(self, n):
        for _ in range(n):
            await RisingEdge(self.dut.clk)

    async def send(self, beats):
        for raw in beats.raws:
            self.lookups.send_nowait(raw)
        await self.lookups.wait_idle()
        await self.wait_idle()

    async def read_array(self, sets=None, *, backpressure=0.5, idle=0.2):
        """Read the sets ``sets`` (default: every set) in random order, with random idle
        requests and backpressure on the responses; return ``(valid, keys, counts)`` as
        ``(len(sets), ways)`` arrays, rows in the order of ``sets``."""
        cfg, dut = self.cfg, self.dut
        sets = list(range(cfg.counter_sets)) if sets is None else list(sets)
        n, ways = len(sets), cfg.counter_ways
        req = StreamSource(dut, "read_req", dut.clk, idle_prob=idle)
        resp = StreamSink(dut, "read_resp", dut.clk, backpressure_prob=backpressure)
        order = list(range(n))
        self.rng.shuffle(order)
        for i in order:
            req.send_nowait(sets[i])
        valid = np.zeros((n, ways), dtype=bool)
        keys = np.zeros((n, ways), dtype=np.uint64)
        counts = np.zeros((n, ways), dtype=np.int64)
        for i in order:
            beat = await resp.recv()
            for w, e in enumerate(beat.fields):
                valid[i, w], keys[i, w], counts[i, w] = e["valid"], e["key"], e["count"]
        await req.wait_idle()
        req.stop()
        resp.stop()
        dut.read_req_valid.value = 0
        dut.read_resp_ready.value = 0
        for _ in range(6):          # nothing more comes out
            await ReadOnly()
            assert not _is_one(dut.read_resp_valid), "read_resp: a response nobody asked for"
            await RisingEdge(dut.clk)
        assert resp.empty()
        return valid, keys, counts

    def sample_sets(self, touched, n=48):
        """The sets ``touched`` and ``n`` random others (directed tests read these only:
        a full read of 1024 sets costs seconds on Icarus)."""
        rest = sorted(set(range(self.cfg.counter_sets)) - set(touched))
        return sorted(set(touched) | set(self.rng.sample(rest, min(n, len(rest)))))

    async def check(self, model, minibatches, what, *, sets=None, backpressure=0.2):
        """Compare the statistics, and every way of every set (or of ``sets``), with the
        golden ``model`` (read back with ``backpressure`` on ``read_resp``)."""
        dut = self.dut
        got_stats = (int(dut.sampled.value), int(dut.learned.value), int(dut.minibatches.value))
        want_stats = (model.sampled, model.totals.learned_lookups, minibatches)
        assert got_stats == want_stats, (
            f"{what}: (sampled, learned, minibatches) = {got_stats}, golden {want_stats}")
        rows = np.arange(self.cfg.counter_sets) if sets is None else np.asarray(sets)
        gv, gk, gc = await self.read_array(rows.tolist(), backpressure=backpressure,
                                           idle=backpressure / 2)
        wv, wk, wc = (a[rows] for a in model.counters.state())
        bad = np.flatnonzero((gv != wv).any(1) | (gk != wk).any(1) | (gc != wc).any(1))
        if bad.size:
            lines = []
            for i in bad[:6].tolist():
                g = [(int(gv[i, w]), hex(int(gk[i, w])), int(gc[i, w])) for w in range(gv.shape[1])]
                e = [(int(wv[i, w]), hex(int(wk[i, w])), int(wc[i, w])) for w in range(wv.shape[1])]
                lines.append(f"  set {rows[i]}: got {g}\n  {' ' * len(str(rows[i]))}  want {e}")
            raise AssertionError(f"{what}: {bad.size} of {len(rows)} sets read differ from the "
                                 f"golden model (valid, key, count per way):\n" + "\n".join(lines))
        self.log.info("%s: %d sets x %d ways match the golden model (%d valid entries; "
                      "sampled %d, learned %d, mini-batches %d)", what, len(rows),
                      gv.shape[1], int(gv.sum()), *got_stats)


def _skip_unless(cond, reason):
    return cocotb.skipif(_CFG is not None and not cond(_CFG), reason=reason)


# --- tests ---------------------------------------------------------------------------------

async def _learn_trace(dut, *, lookups, learn_period, idle, warmup=0):
    tb = TB(dut, idle=idle)
    await tb.reset()
    seed = random.getrandbits(31)
    if warmup:
        # A first learning phase, with LEARN_PERIOD 0 (acts as 1), leaves the array full, so
        # the second start must clear it.
        wb = Beats(tb.cfg, tb.layout, kaggle_batches(tb.cfg, warmup, seed + 1), tb.rng,
                   partial_prob=0.1)
        await tb.start(0)
        await tb.send(wb)
        await tb.check(ref_learn(tb.cfg, wb.minibatches, 0), len(wb.minibatches),
                       "warm-up, learn_period 0", sets=tb.sample_sets([], 128))
    batches = kaggle_batches(tb.cfg, lookups, seed)
    beats = Beats(tb.cfg, tb.layout, batches, tb.rng, partial_prob=0.1, empty_last_prob=0.15,
                  empty_mid_prob=0.002, empty_batches=2, garbage=bad_keys(tb.cfg, tb.np_rng, 64))
    assert any(u == 0 and last for u, last in zip(beats.lanes_used, beats.last))
    if tb.cfg.lanes > 1:
        assert any(0 < u < tb.cfg.lanes for u in beats.lanes_used)
    model = ref_learn(tb.cfg, beats.minibatches, learn_period)
    cfg = tb.cfg
    n_bad = sum(int((np.asarray(mb, dtype=np.uint64) >> np.uint64(cfg.row_bits)
                     >= cfg.num_tables).sum()) for mb in beats.minibatches)
    tb.log.info("trace seed %d: %d lookups (%d bad) in %d mini-batches, %d beats, "
                "learn_period %d, idle %.2f", seed, beats.lookups, n_bad,
                len(beats.minibatches), len(beats), learn_period, idle)
    await tb.start(learn_period)
    t0 = tb.lookups.cycle
    await tb.send(beats)
    tb.log.info("streamed in %d cycles", tb.lookups.cycle - t0)
    await tb.check(model, len(beats.minibatches), f"learn_period {learn_period}",
                   backpressure=0.5)


@cocotb.test()
async def learn_trace(dut):
    """The big run: a kaggle-like trace (HOTLINE_CNT_LOOKUPS lookups, 1 % bad keys, partial
    and empty beats, empty mini-batches), random idle cycles, learn_period 1."""
    await _learn_trace(dut, lookups=_env_int("HOTLINE_CNT_LOOKUPS", 100_000), learn_period=1,
                       idle=0.1)


@cocotb.test()
async def learn_trace_period3(dut):
    """learn_period 3, after a first learning phase with learn_period 0 (acts as 1): start
    must clear a full array."""
    await _learn_trace(dut, lookups=_env_int("HOTLINE_CNT_LOOKUPS_P3", 30_000), learn_period=3,
                       idle=0.2, warmup=2_000)


@cocotb.test()
@cocotb.parametrize(idle=[0.0, 0.5])
async def forwarding_same_set(dut, idle):
    """Lookups of a few sets of ONE bank (two of them in neighbouring rows) back to back:
    the same set one, two and three cycles apart (S2 -> S2 and S2 -> S1 forwarding, and the
    memory), with more keys than ways, so hits, fills and replacements mix; plus a set of
    another bank."""
    tb = TB(dut, idle=idle)
    await tb.reset()
    cfg = tb.cfg
    banks = cfg.counter_banks
    ks = keys_by_set(cfg, tb.np_rng, per_set=cfg.counter_ways + 3)
    b = tb.rng.randrange(banks)
    row = tb.rng.randrange(tb.rows - 1)
    sets = [b + banks * row, b + banks * (row + 1), b + banks * tb.rng.randrange(tb.rows)]
    if banks > 1:
        sets.append((b + 1) % banks + banks * tb.rng.randrange(tb.rows))
    pool = [k for s in sets for k in ks[s]]
    hot = ks[sets[0]][:2]
    keys = [tb.rng.choice(hot) if tb.rng.random() < 0.3 else tb.rng.choice(pool)
            for _ in range(1500)]
    # Runs of one set, and strict alternation of two sets of the bank.
    keys += [ks[sets[0]][i % 3] for i in range(40)]
    keys += [ks[sets[i % 2]][(i // 2) % (cfg.counter_ways + 3)] for i in range(80)]
    beats = Beats(cfg, tb.layout, [keys[:800], keys[800:]], tb.rng, partial_prob=0.2)
    await tb.start(1)
    await tb.send(beats)
    await tb.check(ref_learn(cfg, beats.minibatches), len(beats.minibatches), "forwarding",
                   sets=tb.sample_sets(sets))


@cocotb.test()
async def same_key_all_lanes(dut):
    """One key on every lane of a beat (all lanes in one bank, in one set), then beats
    mixing it with other keys of its set, partial masks with the same key."""
    tb = TB(dut)
    await tb.reset()
    cfg = tb.cfg
    ks = keys_by_set(cfg, tb.np_rng, per_set=cfg.counter_ways + 2)
    s = tb.rng.randrange(cfg.counter_sets)
    k = ks[s][0]
    others = ks[s][1:]
    n = min(60, max(4, cfg.counter_max // 3)) * cfg.lanes
    first = [k] * n
    mixed = [k if tb.rng.random() < 0.5 else tb.rng.choice(others) for _ in range(40 * cfg.lanes)]
    beats = Beats(cfg, tb.layout, [first, mixed, [k] * (8 * cfg.lanes)], tb.rng,
                  partial_prob=0.0)
    beats2 = Beats(cfg, tb.layout, [[k] * (16 * cfg.lanes)], tb.rng, partial_prob=0.7)
    await tb.start(1)
    await tb.send(beats)
    model = ref_learn(cfg, beats.minibatches)
    await tb.check(model, len(beats.minibatches), "same key on all lanes",
                   sets=tb.sample_sets([s]))
    await tb.send(beats2)
    for mb in beats2.minibatches:
        model.minibatch(np.asarray(mb, dtype=np.uint64), None, learn=True, train=False)
    await tb.check(model, len(beats.minibatches) + len(beats2.minibatches),
                   "same key, partial masks", sets=tb.sample_sets([s]))


@_skip_unless(lambda c: c.counter_max <= 255, "counters too wide to saturate in a short test")
@cocotb.test()
async def saturation(dut):
    """Counts stop at counter_max: one key past it; then a set whose every way is saturated
    takes a new key in way 0 (lowest way on a tie) with min(counter_max + 1, counter_max)."""
    tb = TB(dut, idle=0.1)
    await tb.reset()
    cfg = tb.cfg
    cmax, ways = cfg.counter_max, cfg.counter_ways
    ks = keys_by_set(cfg, tb.np_rng, per_set=ways + 2)
    s = tb.rng.randrange(cfg.counter_sets)
    k = ks[s]
    await tb.start(1)
    model = ref_learn(cfg, [])
    one = [k[0]] * (cmax + 3)
    rest = [x for w in range(1, ways) for x in [k[w]] * (cmax + 2)]
    seq = [one, rest, [k[ways]], [k[0]], [k[ways + 1]] * 3]
    n = 0
    for part in seq:
        beats = Beats(cfg, tb.layout, [part], tb.rng, partial_prob=0.1)
        await tb.send(beats)
        model.minibatch(np.asarray(part, dtype=np.uint64), None, learn=True, train=False)
        n += 1
        if part is one or part is rest:
            await tb.check(model, n, f"saturation after {len(part)} lookups",
                           sets=tb.sample_sets([s]))
    _, _, counts = model.counters.state()
    if not cfg.aging_period:    # (aging halves the counts every aging_period mini-batches)
        assert (counts[s] == cmax).all(), "the golden set is not saturated"
    await tb.check(model, n, "replacement in a saturated set", sets=tb.sample_sets([s]))


@cocotb.test()
async def start_mid_stream(dut):
    """A start pulse while beats stream in, in the middle of a mini-batch: the array, the
    mini-batch phase and the statistics clear (busy for exactly R = sets / banks cycles,
    lookups.ready low until the last clear row), and only the beats accepted after the
    pulse are learned."""
    tb = TB(dut, idle=0.2)
    await tb.reset()
    cfg, dut = tb.cfg, tb.dut
    beats = Beats(cfg, tb.layout, kaggle_batches(cfg, 8_000, random.getrandbits(31)), tb.rng,
                  partial_prob=0.2)
    await tb.start(2)
    events = [tb.lookups.send_nowait(raw) for raw in beats.raws]
    mid = len(beats) // 2 + tb.rng.randrange(len(beats) // 8)
    while any(beats.last[mid - 1:mid + 3]):    # start lands inside a mini-batch
        mid += 1
    await events[mid].wait()
    await tb.cycles(tb.rng.randrange(3))
    dut.start.value = 1                 # cycle t
    trace = []
    for c in range(tb.rows + 4):
        await ReadOnly()
        trace.append((_is_one(dut.busy), _is_one(dut.lookups_ready)))
        if c == 1:
            accepted = tb.lookups.count  # handshakes up to the edge that sampled start
        await RisingEdge(dut.clk)
        dut.start.value = 0
    busy = [b for b, _ in trace]
    ready = [r for _, r in trace]
    R = tb.rows
    assert sum(busy[1:]) == R and all(busy[1:R + 1]), f"busy after start: {busy}"
    assert not any(ready[:R]), f"lookups.ready during the clear: {ready}"
    assert ready[R], f"lookups.ready did not rise with the last clear row: {ready}"
    assert 0 < accepted < len(beats) and not beats.last[accepted - 1]
    tb.log.info("start after %d of %d beats (mid mini-batch)", accepted, len(beats))
    await tb.lookups.wait_idle()
    await tb.wait_idle()
    mbs = beats.minibatches_from(accepted)
    await tb.check(ref_learn(cfg, mbs, 2), len(mbs), "after a start mid-stream",
                   backpressure=0.5)


@cocotb.test()
async def throughput(dut):
    """A Zipf trace, full beats, no idle cycles: accepted lookups per cycle, from the first
    to the last accepted beat, must reach HOTLINE_CNT_MIN_LPC (default: the docstring's
    guarantee, one beat per cycle without a bank conflict, at least one lookup per cycle
    with conflicts); the end state is checked too."""
    tb = TB(dut, idle=0.0)
    await tb.reset()
    cfg = tb.cfg
    lookups = _env_int("HOTLINE_CNT_TPUT_LOOKUPS", 20_000)
    beats = Beats(cfg, tb.layout, kaggle_batches(cfg, lookups, random.getrandbits(31),
                                                 bad_key_rate=0.0), tb.rng)
    await tb.start(1)
    events = [tb.lookups.send_nowait(raw) for raw in beats.raws]
    await events[0].wait()
    c0 = tb.lookups.cycle
    await tb.lookups.wait_idle()
    cycles = tb.lookups.cycle - c0 + 1
    lpc = beats.lookups / cycles
    bound = float(os.environ.get("HOTLINE_CNT_MIN_LPC", "") or (1.0 if cfg.lanes == 1 else 1.0))
    tb.log.info("throughput: %d lookups in %d beats, %d cycles: %.3f lookups/cycle "
                "(%.3f beats/cycle; lanes %d, banks %d; bound %.2f)", beats.lookups, len(beats),
                cycles, lpc, len(beats) / cycles, cfg.lanes, cfg.counter_banks, bound)
    with open("throughput.json", "w") as f:
        json.dump({"lanes": cfg.lanes, "banks": cfg.counter_banks, "lookups": beats.lookups,
                   "beats": len(beats), "cycles": cycles, "lookups_per_cycle": lpc,
                   "bound": bound}, f)
    await tb.wait_idle()
    await tb.check(ref_learn(cfg, beats.minibatches), len(beats.minibatches), "throughput",
                   sets=tb.sample_sets([], 128))
    assert lpc >= bound, f"{lpc:.3f} lookups per cycle < {bound}"
