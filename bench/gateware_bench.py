#!/usr/bin/env python3
"""Figures of the learning and lookup gateware: throughput in lookups per cycle, install
cycles, Verilog generation and Verilator build times.

    .venv/bin/python bench/gateware_bench.py [--quick] [--json]

* CAM lookups per cycle: every lane busy every cycle for a few hundred cycles (amaranth.sim);
  results per cycle must equal ``lanes`` (initiation interval 1).
* Counter array lookups per cycle on a Criteo Kaggle Zipf trace (amaranth.sim), per lanes
  setting: accepted lookups / cycles from the first to the last accepted beat, with no idle
  input; the array stalls only on bank conflicts.
* Install cycles of the `ulx3s` preset after learning a Kaggle trace, against the formula
  of ``hotline_hw/gateware/install.py``.
* Verilog generation time of each unit and of the whole learning/lookup half for the
  largest preset (`terabyte`), and the Verilator build time of the `ulx3s` half.

Cycle counts are exact and repeatable; times depend on the machine.
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np                                               # noqa: E402
from amaranth.sim import Simulator                               # noqa: E402

from golden import synth                                         # noqa: E402
from golden.counters import CounterArray                         # noqa: E402
from hotline_hw.config import preset                             # noqa: E402
from hotline_hw.gateware.cam import PopularityCAM                # noqa: E402
from hotline_hw.gateware.counters import AccessCounterArray      # noqa: E402
from hotline_hw.gateware.export import export                    # noqa: E402
from hotline_hw.gateware.install import InstallEngine                  # noqa: E402
from hotline_hw.gateware.models import counter_read_port, counter_set_words  # noqa: E402
from hotline_hw.gateware.popularity import PopularityEngine      # noqa: E402


def cam_lookups_per_cycle(cfg, cycles=200):
    dut = PopularityCAM(cfg)
    out = {}

    async def tb(ctx):
        rng = np.random.default_rng(0)
        await ctx.tick().repeat(cfg.cam_sets + 4)          # the self-erase after reset
        n = 0
        for c in range(cycles + dut.LATENCY):
            if c < cycles:
                ctx.set(dut.lookup_valid, (1 << cfg.lanes) - 1)
                ctx.set(dut.lookup_keys, [int(k) for k in rng.integers(0, 1 << cfg.key_bits, cfg.lanes)])
            else:
                ctx.set(dut.lookup_valid, 0)
            await ctx.tick()
            n += bin(ctx.get(dut.result_valid)).count("1")
        out["per_cycle"] = n / cycles

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return out["per_cycle"]


def counter_lookups_per_cycle(cfg, lookups):
    tr = synth.generate("kaggle", lookups=lookups, zipf=1.1, seed=3)
    keys = tr.keys(cfg)[:lookups].tolist()
    dut = AccessCounterArray(cfg)
    beats = [keys[i:i + cfg.lanes] for i in range(0, len(keys), cfg.lanes)]
    out = {}

    async def tb(ctx):
        ctx.set(dut.learn_period, 1)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        await ctx.tick().until(~dut.busy)
        first = last = None
        cycle = 0
        for b in beats:
            ctx.set(dut.lookups.payload, {"keys": b + [0] * (cfg.lanes - len(b)),
                                          "keep": (1 << len(b)) - 1, "last": 0})
            ctx.set(dut.lookups.valid, 1)
            while True:
                _, _, ready = await ctx.tick().sample(dut.lookups.ready)
                cycle += 1
                if ready:
                    break
            first = cycle if first is None else first
            last = cycle
        ctx.set(dut.lookups.valid, 0)
        out["per_cycle"] = len(keys) / (last - first + 1)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return out["per_cycle"]


def install_cycles(cfg, lookups):
    tr = synth.generate("kaggle", lookups=lookups, zipf=1.1, seed=4)
    ca = CounterArray(cfg)
    keys = tr.keys(cfg)
    ca.update(keys[(keys >> np.uint64(cfg.row_bits)) < np.uint64(cfg.num_tables)])
    dut = InstallEngine(cfg)
    out = {}
    # a counter array answering two cycles after each request, never stalling
    counter_port = counter_read_port(dut.counter_req, dut.counter_resp, counter_set_words(cfg, ca),
                                     delay=1)

    async def main(ctx):
        ctx.set(dut.cam_write.ready, 1)
        ctx.set(dut.placed.ready, 1)
        ctx.set(dut.threshold, cfg.learn_threshold)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        n = 1
        while not ctx.get(dut.done):
            await ctx.tick()
            n += 1
        out.update(cycles=n, installed=ctx.get(dut.installed), candidates=ctx.get(dut.candidates))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(counter_port, background=True)
    sim.add_testbench(main)
    sim.run()
    return out


def generation_times(cfg):
    res = {}
    for name, cls in (("counters", AccessCounterArray), ("cam", PopularityCAM),
                      ("install", InstallEngine), ("popularity", PopularityEngine)):
        t0 = time.perf_counter()
        text, _ = export(cls(cfg), name)
        res[name] = {"seconds": time.perf_counter() - t0, "kbytes": len(text) // 1000}
    return res


def verilator_build_seconds(cfg):
    """``(first, model)``: a build in an empty build directory (Verilator's runtime compiled
    too), and a rebuild of the model alone (the runtime objects come from the cache)."""
    import os
    from sim import runner
    with tempfile.TemporaryDirectory() as d:
        old = os.environ.get("HOTLINE_BUILD_DIR")
        os.environ["HOTLINE_BUILD_DIR"] = d
        try:
            first = runner.build("popularity", cfg, "verilator")
            import shutil
            shutil.rmtree(first.dir)         # the model goes; the runtime object cache stays
            again = runner.build("popularity", cfg, "verilator")
            return first.seconds, again.seconds
        finally:
            if old is None:
                del os.environ["HOTLINE_BUILD_DIR"]
            else:
                os.environ["HOTLINE_BUILD_DIR"] = old


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller traces")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    n = 4000 if args.quick else 20000
    res = {"cam": {}, "counters": {}}
    for kind in ("full", "hash"):
        for lanes in (1, 2, 4, 8):
            cfg = (preset("tiny", lanes=lanes) if kind == "full" else
                   preset("ulx3s", lanes=lanes, cam_entries=512, cam_ways=8))
            res["cam"][f"{kind}-l{lanes}"] = cam_lookups_per_cycle(cfg)
    for lanes in (1, 2, 4, 8):
        cfg = preset("ulx3s", lanes=lanes, counter_banks=max(4, lanes), max_sample_lookups=max(32, lanes))
        res["counters"][f"l{lanes}-banks{cfg.counter_banks}"] = counter_lookups_per_cycle(cfg, n)
    u = preset("ulx3s")
    inst = install_cycles(u, 50_000 if args.quick else 200_000)
    L, S, W = 1 << u.counter_bits, u.counter_sets, u.counter_ways
    inst["formula_bound"] = (max(L, u.cam_sets) + 2 * S * (W + 4) + (L + 4)
                             + inst["candidates"] * 12)
    res["install_ulx3s"] = inst
    res["generate_terabyte"] = generation_times(preset("terabyte"))
    res["verilator_build_ulx3s_s"] = verilator_build_seconds(u)
    if args.json:
        print(json.dumps(res, indent=2))
        return
    print("CAM lookups per cycle (every lane busy every cycle; must equal lanes)")
    for k, v in res["cam"].items():
        print(f"  {k:10} {v:5.2f}")
    print(f"counter array lookups per cycle, Kaggle Zipf 1.1 trace of {n} lookups, no idle input")
    for k, v in res["counters"].items():
        print(f"  {k:14} {v:5.2f}")
    i = res["install_ulx3s"]
    print(f"install, ulx3s preset ({S} sets x {W} ways, {u.counter_bits}-bit counters): "
          f"{i['cycles']} cycles for {i['candidates']} candidates, {i['installed']} installed "
          f"(formula bound {i['formula_bound']})")
    print("Verilog generation, terabyte preset (the largest)")
    for k, v in res["generate_terabyte"].items():
        print(f"  {k:11} {v['seconds']:6.1f} s  {v['kbytes']:6d} kB")
    first, model = res["verilator_build_ulx3s_s"]
    print(f"Verilator build of the ulx3s learning/lookup half: {first:.1f} s in an empty build "
          f"directory, {model:.1f} s for the model alone")


if __name__ == "__main__":
    main()
