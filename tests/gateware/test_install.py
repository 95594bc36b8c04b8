"""The install engine against the golden install policy, with the counter array's read port
and the CAM's write port modelled in the testbench (random latency and backpressure)."""
import random

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.sim import Simulator

from golden.cam import Cam
from golden.counters import CounterArray
from hotline_hw.config import preset
from hotline_hw.gateware.install import InstallEngine
from hotline_hw.gateware.models import counter_read_port, counter_set_words, stream_sink


def ref_install(cfg, counters, threshold):
    keys, _ = counters.install_candidates(max(1, threshold))
    cam = Cam(cfg)
    r = cam.install(keys)
    return list(zip(r.keys.tolist(), r.slots.tolist())), r.skipped, len(keys)


def rtl_install(cfg, counters, threshold, seed=0, stall=0.3):
    """Run the engine; returns (placed records, cam writes, skipped, candidates, cycles)."""
    dut = InstallEngine(cfg)
    rng = random.Random(seed)
    words = counter_set_words(cfg, counters)
    out = {"placed": [], "writes": [], "cycles": 0}
    counter_port = counter_read_port(dut.counter_req, dut.counter_resp, words, rng=rng,
                                     stall=stall, max_delay=3)

    def sink(port, name):
        return stream_sink(port, out[name], lambda p: (p.key, p.slot, getattr(p, "used", 1)),
                           rng=rng, backpressure=stall)

    async def main(ctx):
        ctx.set(dut.threshold, threshold)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        n = 1
        while not ctx.get(dut.done):
            await ctx.tick()
            n += 1
            assert n < 2_000_000
        out["cycles"] = n
        out["placed_at_done"] = len(out["placed"])   # the DMA has every record at done
        assert not ctx.get(dut.busy)             # done leaves the engine idle
        out["skipped"] = ctx.get(dut.skipped)
        out["candidates"] = ctx.get(dut.candidates)
        out["installed"] = ctx.get(dut.installed)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(counter_port, background=True)
    sim.add_testbench(sink(dut.cam_write, "writes"), background=True)
    sim.add_testbench(sink(dut.placed, "placed"), background=True)
    sim.add_testbench(main)
    sim.run()
    return out


def learned(cfg, n, seed, zipf=1.2, keyspace=400):
    rng = np.random.default_rng(seed)
    ranks = rng.zipf(zipf, size=n) % keyspace
    perm = rng.permutation(1 << cfg.key_bits)[:keyspace] if cfg.key_bits <= 16 else \
        rng.integers(0, 1 << cfg.key_bits, size=keyspace)
    keys = perm[ranks].astype(np.uint64)
    # keep keys with valid table ids so every one is counted
    keys = keys & np.uint64((1 << (cfg.key_bits - 1)) - 1) if cfg.num_tables < (1 << cfg.table_bits) else keys
    ca = CounterArray(cfg)
    ca.update(keys)
    return ca


CONFIGS = {
    "full16": preset("tiny", counter_sets=16, counter_ways=4, counter_bits=6),
    "full16-3way": preset("tiny", counter_sets=8, counter_ways=3, counter_bits=5),
    "hash64x4": preset("tiny", cam_kind="hash", cam_entries=64, cam_ways=4,
                       counter_sets=64, counter_ways=4, counter_bits=6, counter_banks=2),
    "hash32x2-small": preset("tiny", cam_kind="hash", cam_entries=32, cam_ways=2,
                             counter_sets=32, counter_ways=2, counter_bits=4),
}


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("threshold", [1, 3])
def test_install_matches_golden(name, threshold):
    cfg = CONFIGS[name]
    ca = learned(cfg, 600, seed=len(name) + threshold)
    exp, skipped, cands = ref_install(cfg, ca, threshold)
    got = rtl_install(cfg, ca, threshold, seed=threshold)
    assert [(k, s) for k, s, _ in got["placed"]] == exp
    assert got["placed_at_done"] == len(exp)
    assert [(k, s) for k, s, _ in got["writes"]] == exp
    assert all(v == 1 for _, _, v in got["writes"])
    assert got["skipped"] == skipped and got["candidates"] == cands
    assert got["installed"] == len(exp)


def test_saturated_ties_and_empty_array():
    cfg = CONFIGS["full16"]
    ca = CounterArray(cfg)
    ca.update(np.repeat(np.arange(1, 30, dtype=np.uint64), 70))   # all saturate at 63
    exp, _, _ = ref_install(cfg, ca, 1)
    got = rtl_install(cfg, ca, 1)
    assert [(k, s) for k, s, _ in got["placed"]] == exp and len(exp) == 16
    empty = CounterArray(cfg)
    got = rtl_install(cfg, empty, 1)
    assert got["placed"] == [] and got["candidates"] == 0


def test_install_cycles_scale_with_the_array():
    cfg = CONFIGS["hash64x4"]
    ca = learned(cfg, 600, seed=5)
    got = rtl_install(cfg, ca, 1, stall=0.0)
    _, _, cands = ref_install(cfg, ca, 1)
    S, W, L = cfg.counter_sets, cfg.counter_ways, 1 << cfg.counter_bits
    # CLEAR, HIST, PREFIX (one level per cycle), SCATTER, WALK (see the module docstring)
    bound = max(L, cfg.cam_sets) + S * (W + 4) + (L + 4) + S * (W + 4) + cands * 12
    assert got["cycles"] <= bound, (got["cycles"], bound)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_converts_to_verilog(name):
    assert "module" in verilog.convert(InstallEngine(CONFIGS[name]), name="install")
