"""cocotb regression of the learning and lookup half (:class:`PopularityEngine`): counter
array -> install engine -> popularity CAM, against the golden model.

One test runs the whole flow on a synthetic trace (kaggle-like for Criteo-sized keys, the
``tiny`` workload otherwise):

1. LEARN: the first mini-batches stream into the counter array, beats of ``lanes`` keys with
   random ``keep`` holes and random idle cycles, ``last`` on each mini-batch's last beat;
2. INSTALL: clear the CAM, run the install engine, take every ``placed`` record with random
   backpressure and compare the list (order, keys, slots) and the install figures with the
   golden :class:`HotlineModel`;
3. read back every CAM slot through the host port (random backpressure) against the golden
   CAM;
4. TRAIN-side lookups: the rest of the trace on the CAM's lanes, random idle lanes and idle
   cycles; every result (hit, slot) against the golden CAM, each exactly ``LATENCY`` cycles
   after its key (so the initiation interval is one beat per cycle).

Environment: ``HOTLINE_TB_LOOKUPS`` (lookups in the trace, default 100000) and
``HOTLINE_TB_LEARN_PERIOD`` (default 1).
"""

import os
import random
from collections import deque

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge

from golden import synth
from golden.model import HotlineModel
from sim.streams import StreamSink, StreamSource, load_config, reset, start_clock


def workload_for(cfg):
    return "kaggle" if cfg.num_tables >= 26 and cfg.row_bits >= 24 else "tiny"


def beats_of(keys, lanes, rng, hole_prob=0.2):
    """Beats of one mini-batch: up to ``lanes`` keys each, with random holes (``keep`` 0 in
    the middle of a beat), the last beat marked ``last``; sometimes an empty last beat."""
    beats, cur, keep = [], [0] * lanes, 0
    lane = 0
    for k in keys:
        while lane < lanes and rng.random() < hole_prob / lanes:
            lane += 1                          # a hole
        if lane == lanes:
            beats.append({"keys": cur, "keep": keep, "last": 0})
            cur, keep, lane = [0] * lanes, 0, 0
        cur[lane] = int(k)
        keep |= 1 << lane
        lane += 1
        if lane == lanes:
            beats.append({"keys": cur, "keep": keep, "last": 0})
            cur, keep, lane = [0] * lanes, 0, 0
    if keep or not beats or rng.random() < 0.1:
        beats.append({"keys": cur, "keep": keep, "last": 1})
    else:
        beats[-1]["last"] = 1
    return beats


async def pulse(dut, signal):
    signal.value = 1
    await RisingEdge(dut.clk)
    signal.value = 0


async def wait_until(dut, cond, limit=200_000, what="condition"):
    for _ in range(limit):
        await RisingEdge(dut.clk)
        await ReadOnly()
        if cond():
            await RisingEdge(dut.clk)
            return
    raise AssertionError(f"timed out waiting for {what}")


@cocotb.test()
async def learn_install_lookup(dut):
    cfg = load_config()
    rng = random.Random(random.getrandbits(32))     # cocotb seeds `random` (replayable)
    n_lookups = int(os.environ.get("HOTLINE_TB_LOOKUPS", "100000"))
    period = int(os.environ.get("HOTLINE_TB_LEARN_PERIOD", "1"))
    wl = synth.WORKLOADS[workload_for(cfg)]
    # at least six mini-batches: four to learn from, two to look up
    batch = max(4, min(wl.batch_size, n_lookups // (6 * wl.lookups_per_sample)))
    trace = synth.generate(wl.name, lookups=n_lookups, zipf=1.1, seed=7, batch_size=batch,
                           bad_key_rate=0.01, table_bits=cfg.table_bits)
    keys = trace.keys(cfg)
    loff = trace.batch_lookup_offsets
    n_learn = max(1, trace.n_batches * 2 // 3)

    # --- golden ----------------------------------------------------------------------
    model = HotlineModel(cfg.replace(learn_period=period))
    model.start_learning()
    for b in range(n_learn):
        model.minibatch(keys[loff[b]:loff[b + 1]], None, learn=True, train=False)
    ref = model.install()

    # --- LEARN -----------------------------------------------------------------------
    start_clock(dut)
    for name in ("lookup_valid", "learn_start", "install_start", "cam_clear", "lookups_valid",
                 "placed_ready", "host_write_valid", "host_read_req_valid", "host_read_resp_ready"):
        getattr(dut, name).value = 0
    dut.learn_period.value = period
    dut.threshold.value = cfg.learn_threshold
    await reset(dut)
    await pulse(dut, dut.learn_start)
    await wait_until(dut, lambda: not int(dut.busy.value), what="counter clear")
    dut._log.info("counter array cleared")
    src = StreamSource(dut, "lookups", dut.clk, idle_prob=0.2)
    for b in range(n_learn):
        for beat in beats_of(keys[loff[b]:loff[b + 1]], cfg.lanes, rng):
            src.send_nowait(beat)
    await src.wait_idle()
    await ClockCycles(dut.clk, 8)
    dut._log.info("learning: %d mini-batches streamed", n_learn)
    assert int(dut.minibatches.value) == n_learn
    assert int(dut.sampled.value) == model.sampled
    assert int(dut.learned.value) == model.totals.learned_lookups

    # --- INSTALL ---------------------------------------------------------------------
    await pulse(dut, dut.cam_clear)
    await wait_until(dut, lambda: not int(dut.busy.value), what="CAM clear")
    dut._log.info("CAM cleared; installing")
    placed = StreamSink(dut, "placed", dut.clk, backpressure_prob=0.3)
    await pulse(dut, dut.install_start)
    S, W = cfg.counter_sets, cfg.counter_ways
    limit = 4 * (1 << cfg.counter_bits) + 4 * S * (W + 8) + 40 * S * W + 1000
    await wait_until(dut, lambda: int(dut.install_done.value), limit=limit, what="install")
    got = []
    while not placed.empty():
        b = placed.recv_nowait()
        got.append((b["key"], b["slot"]))
    want = list(zip(ref.keys.tolist(), ref.slots.tolist()))
    assert len(got) == len(want), f"{len(got)} rows placed, golden {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"placed record {i}: got (key, slot) {g}, golden {w}"
    assert int(dut.installed.value) == len(want)
    assert int(dut.skipped.value) == ref.skipped
    cands, _ = model.counters.install_candidates(cfg.learn_threshold)
    assert int(dut.candidates.value) == len(cands)
    dut._log.info("learned %d lookups, installed %d rows (%d skipped, %d candidates)",
                  model.totals.learned_lookups, len(want), ref.skipped, len(cands))

    # --- read back every slot -------------------------------------------------------------
    req = StreamSource(dut, "host_read_req", dut.clk, idle_prob=0.1)
    resp = StreamSink(dut, "host_read_resp", dut.clk, backpressure_prob=0.3)
    contents = model.cam.contents()
    for slot in range(cfg.cam_entries):
        req.send_nowait(slot)
    for slot in range(cfg.cam_entries):
        b = await resp.recv()
        want = (1, contents[slot]) if slot in contents else (0, 0)
        assert (b["used"], b["key"]) == want, f"slot {slot}: got {(b['used'], b['key'])}, golden {want}"

    # --- lookups ---------------------------------------------------------------------------
    look = keys[loff[n_learn]:]
    hit, slot = model.cam.lookup(look)
    expected = deque()            # per driven beat: list of (lane, hit, slot) or None
    results = []
    i = 0
    cycle = 0
    while i < len(look) or expected:
        await FallingEdge(dut.clk)             # drive between edges, sample after them
        if i < len(look) and rng.random() > 0.1:
            lanes = []
            kv = [0] * cfg.lanes
            valid = 0
            for ln in range(cfg.lanes):
                if i < len(look) and rng.random() > 0.15:
                    kv[ln] = int(look[i])
                    valid |= 1 << ln
                    lanes.append((ln, bool(hit[i]), int(slot[i]) if hit[i] else 0))
                    i += 1
            dut.lookup_valid.value = valid
            dut.lookup_keys.value = sum(k << (ln * cfg.key_bits) for ln, k in enumerate(kv))
            if valid:
                expected.append((cycle, lanes))
        else:
            dut.lookup_valid.value = 0
        await RisingEdge(dut.clk)
        cycle += 1
        await ReadOnly()
        rv = int(dut.result_valid.value)
        if rv:
            assert expected, f"cycle {cycle}: result with no lookup in flight"
            when, lanes = expected.popleft()
            rh = int(dut.result_hit.value)
            rs = int(dut.result_slot.value)
            assert rv == sum(1 << ln for ln, _, _ in lanes), f"cycle {cycle}: lanes {rv:b}"
            for ln, h, s in lanes:
                got = (bool((rh >> ln) & 1), (rs >> (ln * cfg.slot_bits)) & ((1 << cfg.slot_bits) - 1))
                assert got == (h, s), f"lookup at cycle {when}, lane {ln}: got {got}, golden {(h, s)}"
            results.append(cycle - when)
    await FallingEdge(dut.clk)
    dut.lookup_valid.value = 0
    assert len(set(results)) == 1, f"latency varies: {sorted(set(results))}"
    dut._log.info("%d lookups checked, latency %d cycles from drive to result", len(look), results[0])
