"""The mini-batch fragmenter against golden ``fragment()`` + ``pack_output_beats()``: framed
mini-batches with random idle cycles on the input and random backpressure on both outputs
and the gather stream; every output beat, gather request and statistic is compared."""
import random

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from golden.cam import Cam
from golden.fragment import fragment
from golden.framing import frame_lookup_beats, pack_output_beats, parse_lookup_beats
from golden.records import BatchCounters
from hotline_hw.config import preset
from hotline_hw.gateware.fragmenter import STAT_NAMES, MiniBatchFragmenter
from hotline_hw.gateware.models import stream_sink


def make_cfg(lanes, kind="full", staging_rows=8):
    extra = {}
    if kind == "hash":
        extra = dict(cam_kind="hash", cam_entries=32, cam_ways=4)
    return preset("tiny", lanes=lanes, max_sample_lookups=max(lanes, 6), staging_rows=staging_rows,
                  dedup_sets=4, dedup_ways=2, **extra)


def make_cam(cfg, pool, rng):
    """A golden CAM holding some keys of ``pool``; returns (cam, [(slot, key)] writes)."""
    cam = Cam(cfg)
    writes = []
    cands = [k for k in pool if (k >> cfg.row_bits) < cfg.num_tables]
    rng.shuffle(cands)
    for k in cands[:cfg.cam_entries // 2]:
        if cfg.cam_kind == "full":
            free = [s for s in range(cfg.cam_entries) if not cam.valid[s]]
        else:
            base = int(cam.set_of(np.array([k], dtype=np.uint64))[0]) * cfg.cam_ways
            free = [s for s in range(base, base + cfg.cam_ways) if not cam.valid[s]]
        if not free:
            continue
        s = rng.choice(free)
        assert cam.write(s, k)
        writes.append((s, k))
    return cam, writes


def make_beats(cfg, rng, nprng, n_batches):
    pool = [rng.randrange(1 << cfg.key_bits) for _ in range(40)]
    beats = []
    for b in range(n_batches):
        n_samples = rng.choice([0, 1, 3, 6, 10])
        samples = []
        for _ in range(n_samples):
            n = rng.choice([0, 1, 2, 3, 5, cfg.max_sample_lookups,
                            cfg.max_sample_lookups + 1, cfg.max_sample_lookups + 4])
            samples.append([rng.choice(pool) if rng.random() < 0.8
                            else rng.randrange(1 << cfg.key_bits) for _ in range(n)])
        mb = frame_lookup_beats(samples, cfg.lanes, rng=nprng, hole_prob=0.2,
                                empty_end_prob=0.2)
        if rng.random() < 0.2 and mb[-1]["keep"]:
            mb[-1]["user"] = 0                     # `last` closes the open sample
        beats += mb
    return pool, beats


def expected(cfg, cam, beats):
    parsed = parse_lookup_beats(beats, cfg.lanes)
    assert parsed.unterminated == 0
    pop, npop, gath = [], [], []
    tot = BatchCounters()
    for n, batch in enumerate(parsed.minibatches):
        keys = np.array([k for s in batch for k in s], dtype=np.uint64)
        lengths = np.array([len(s) for s in batch], dtype=np.int64)
        bank = n % cfg.staging_banks
        r = fragment(cfg, cam, keys, lengths, bank)
        pop += pack_output_beats(r.popular, cfg.lanes)
        npop += pack_output_beats(r.nonpopular, cfg.lanes)
        gath += [(int(k), bank, int(i)) for k, i in zip(r.gather_keys, r.gather_indices)]
        tot += r.counters
    return pop, npop, gath, tot


def out_beat(p, lanes):
    return {"sample_id": p.sample_id,
            "lookups": [(p.lookups[i].tag, p.lookups[i].value) for i in range(lanes)],
            "keep": p.keep, "user": p.user, "last": p.last}


def run(cfg, seed, n_batches=6, idle=0.3, stall=0.3):
    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    pool, beats = make_beats(cfg, rng, nprng, n_batches)
    cam, writes = make_cam(cfg, pool, rng)
    exp_pop, exp_np, exp_g, exp_c = expected(cfg, cam, beats)

    dut = MiniBatchFragmenter(cfg)
    cycle = Signal(32)
    got = {"popular": [], "nonpopular": [], "gather": []}
    res = {}

    def sink(port, name, conv):
        return stream_sink(port, got[name], conv, rng=rng, backpressure=stall)

    async def main(ctx):
        await ctx.tick().until(~dut.cam_busy)
        for s, k in writes:
            ctx.set(dut.cam_write.payload, {"slot": s, "key": k, "used": 1})
            ctx.set(dut.cam_write.valid, 1)
            await ctx.tick().until(dut.cam_write.ready)
        ctx.set(dut.cam_write.valid, 0)
        for _ in range(10):                        # let the last write land
            await ctx.tick()
        t0 = ctx.get(cycle)
        for b in beats:
            while rng.random() < idle:
                ctx.set(dut.lookups.valid, 0)
                await ctx.tick()
            ctx.set(dut.lookups.payload, {"keys": b["keys"], "keep": b["keep"],
                                          "user": b["user"], "last": b["last"]})
            ctx.set(dut.lookups.valid, 1)
            await ctx.tick().until(dut.lookups.ready)
        ctx.set(dut.lookups.valid, 0)
        n = 0
        while (len(got["popular"]) < len(exp_pop) or len(got["nonpopular"]) < len(exp_np)
               or len(got["gather"]) < len(exp_g)):
            await ctx.tick()
            n += 1
            assert n < 100_000
        res["cycles"] = ctx.get(cycle) - t0
        for _ in range(20):                        # nothing more may come out
            await ctx.tick()
        res.update({s: ctx.get(getattr(dut, "stat_" + s)) for s in STAT_NAMES})

    m = Module()
    m.submodules.dut = dut
    m.d.sync += cycle.eq(cycle + 1)
    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(sink(dut.popular, "popular", lambda p: out_beat(p, cfg.lanes)),
                      background=True)
    sim.add_testbench(sink(dut.nonpopular, "nonpopular", lambda p: out_beat(p, cfg.lanes)),
                      background=True)
    sim.add_testbench(sink(dut.gather, "gather", lambda p: (p.key, p.bank, p.index)),
                      background=True)
    sim.add_testbench(main)
    sim.run()

    assert got["gather"] == exp_g
    assert got["popular"] == exp_pop
    assert got["nonpopular"] == exp_np
    exp_stats = {s: getattr(exp_c, s) for s in STAT_NAMES}
    assert {s: res[s] for s in STAT_NAMES} == exp_stats
    return exp_c, res["cycles"], len(beats)


@pytest.mark.parametrize("lanes", [1, 2, 4])
@pytest.mark.parametrize("seed", [1, 2])
def test_fragmenter_matches_golden(lanes, seed):
    # staging_rows 4 < dedup capacity 8: both refusals (staging full, de-dup full) occur
    c, _, _ = run(make_cfg(lanes, staging_rows=4 * seed), seed=seed + 10 * lanes)
    # the random stimulus exercises every path somewhere
    assert c.lookups and c.bad_keys and c.long_samples


def test_fragmenter_hash_cam():
    run(make_cfg(2, "hash"), seed=7)


def test_coverage_of_refusals():
    """Across the seeds, hits, staging full and de-dup full all occur."""
    tot = BatchCounters()
    for lanes in (1, 2, 4):
        for seed in (1, 2):
            cfg = make_cfg(lanes, staging_rows=4 * seed)
            rng, nprng = random.Random(seed + 10 * lanes), np.random.default_rng(seed + 10 * lanes)
            pool, beats = make_beats(cfg, rng, nprng, 6)
            cam, _ = make_cam(cfg, pool, rng)
            tot += expected(cfg, cam, beats)[3]
    assert tot.hits and tot.staging_full and tot.dedup_full and tot.popular_samples
    assert tot.staged_rows and tot.nonpopular_samples


@pytest.mark.parametrize("lanes", [1, 4])
def test_throughput_first_cut(lanes):
    """No idle, no backpressure: the sequential first cut translates one key per
    ``LATENCY + 1..2`` cycles (full CAM: LATENCY 4), plus a drain cycle per buffered lookup,
    a few cycles per sample and ``dedup_sets + 3`` per mini-batch."""
    cfg = make_cfg(lanes)
    c, cycles, n_beats = run(cfg, seed=3, n_batches=8, idle=0.0, stall=0.0)
    kpc = c.lookups / cycles
    print(f"lanes={lanes}: {c.lookups} keys, {n_beats} beats in {cycles} cycles: "
          f"{kpc:.3f} keys/cycle, {n_beats / cycles:.3f} beats/cycle")
    assert kpc > 0.1


@pytest.mark.parametrize("lanes,kind", [(1, "full"), (4, "full"), (2, "hash")])
def test_converts_to_verilog(lanes, kind):
    v = verilog.convert(MiniBatchFragmenter(make_cfg(lanes, kind)), name="fragmenter")
    assert "module fragmenter" in v
