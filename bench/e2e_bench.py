#!/usr/bin/env python3
"""Cycles per mini-batch of the whole accelerator, end to end on the generated Verilog.

    .venv/bin/python bench/e2e_bench.py [--preset kaggle] [--sim verilator] [--batches N]
                                        [--batch-size S] [--latency L] [--json]

It runs the cocotb end-to-end test (``sim/tb_hotline.py``) through ``run_cocotb`` with no
idle cycles, no backpressure and no bus pauses, so every figure is the accelerator's own:

1. LEARN on ``--learn`` mini-batches, STOP, INSTALL;
2. TRAIN ``--batches`` mini-batches of ``--batch-size`` samples (the workload's own batch
   size by default: 1024 for Kaggle); after each one the test waits for ``gathers_done`` of
   its bank, applies the modelled GPU update and SCATTERs the bank (what the golden model
   checks); then EVICT. Memory is cocotbext-axi's AXI4 RAM with ``--latency`` cycles of
   read latency and reads reordered across IDs. Every output beat and the whole memory are
   checked against the golden model, as in the regression.

Per trained mini-batch it prints, counted from the cycle of its first input beat:

* ``in``: cycles to its last input beat (``beats / in`` = input beats per cycle; 1.0 = the
  fragmenter never stalled the lookup stream);
* ``out``: cycles until both outputs have sent the mini-batch's terminator beat (the GPUs
  have the whole popular and non-popular micro-batches);
* ``gathered``: cycles until ``STATUS.gathers_done`` of its bank was seen by polling over
  AXI4-Lite (some tens of cycles of granularity): every non-popular row is in the staging
  bank and the non-popular micro-batch can be trained.

The trace is Criteo Kaggle-like (26 tables, Kaggle skew) with every table capped at
``--rows`` rows so that the simulated host memory stays small (the big Kaggle tables hold
millions of rows; capping them raises the hit rate a little).
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from golden.synth import WORKLOADS                               # noqa: E402
from hotline_hw.config import PRESETS                            # noqa: E402
from sim.runner import run_cocotb                                # noqa: E402


def run(preset, sim, learn, batches, batch_size, latency, rows):
    cfg = PRESETS[preset]
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "e2e.json"
        t0 = time.monotonic()
        r = run_cocotb("hotline", cfg, sim=sim, test_module="sim.tb_hotline",
                       testcase="hotline_flow", timeout_s=4 * 3600, extra_env={
                           "HOTLINE_TB_LEARN": str(learn), "HOTLINE_TB_BATCHES": str(batches),
                           "HOTLINE_TB_BATCH_SIZE": str(batch_size),
                           "HOTLINE_TB_ROWS": str(rows), "HOTLINE_TB_LATENCY": str(latency),
                           "HOTLINE_TB_CAM_SLOTS": "64", "HOTLINE_TB_IDLE": "0",
                           "HOTLINE_TB_STALL": "0", "HOTLINE_TB_PAUSE": "0",
                           "HOTLINE_TB_HOLES": "0", "HOTLINE_TB_REPORT": str(out)})
        rep = json.loads(out.read_text())
    rep["seconds"] = round(time.monotonic() - t0, 1)
    rep["build_seconds"] = round(r.build.seconds, 1) if r.build.rebuilt else None
    return rep


def summary(rep):
    mbs = rep["minibatches"]
    n = len(mbs)

    def mean(k):
        return sum(m[k] for m in mbs) / n
    return {
        "preset": rep["config"], "batch_size": rep["batch_size"], "minibatches": n,
        "lookups_per_minibatch": mean("lookups"), "input_beats": mean("input_beats"),
        "cycles_in": mean("cycles_input"), "cycles_out": mean("cycles_output"),
        "cycles_gathered": mean("cycles_gathered"),
        "beats_per_cycle_min": min(m["input_beats"] / m["cycles_input"] for m in mbs),
        "lookups_per_cycle": sum(m["lookups"] for m in mbs) / sum(m["cycles_input"] for m in mbs),
        "rows_gathered": mean("staged_rows"),
        "popular_share": sum(m["popular_samples"] for m in mbs) / sum(m["samples"] for m in mbs),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="kaggle", choices=sorted(PRESETS))
    ap.add_argument("--sim", default="verilator", choices=("verilator", "icarus"))
    ap.add_argument("--learn", type=int, default=4, help="LEARN mini-batches (4)")
    ap.add_argument("--batches", type=int, default=4, help="TRAIN mini-batches (4)")
    ap.add_argument("--batch-size", type=int, default=None,
                    help="samples per mini-batch (default: the Kaggle workload's, 1024)")
    ap.add_argument("--latency", type=int, default=200, help="memory read latency (200)")
    ap.add_argument("--rows", type=int, default=65536, help="rows per table at most (65536)")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    a = ap.parse_args(argv)
    bs = a.batch_size or WORKLOADS["kaggle"].batch_size
    rep = run(a.preset, a.sim, a.learn, a.batches, bs, a.latency, a.rows)
    s = summary(rep)
    if a.json:
        print(json.dumps({"summary": s, "report": rep}, indent=1))
        return
    cfg = PRESETS[a.preset]
    print(f"preset {a.preset} ({cfg.summary()}), {a.sim}, memory latency {a.latency} "
          f"cycles, tables capped at {a.rows} rows; {rep['seconds']} s "
          f"(build {rep['build_seconds']} s)")
    print(f"LEARN {a.learn} x {bs} samples, INSTALL {rep['installed_rows']} rows; cycles per "
          f"phase: " + ", ".join(f"{k} {v:,}" for k, v in rep["phases"].items()))
    print()
    print("| mini-batch | samples | lookups | input beats | in | out | gathered | rows gathered "
          "| popular samples | beats/cycle |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for i, m in enumerate(rep["minibatches"]):
        print(f"| {i} | {m['samples']} | {m['lookups']} | {m['input_beats']} | "
              f"{m['cycles_input']} | {m['cycles_output']} | {m['cycles_gathered']} | "
              f"{m['staged_rows']} | {m['popular_samples']} | "
              f"{m['input_beats'] / m['cycles_input']:.3f} |")
    print()
    print(f"mean cycles per mini-batch: in {s['cycles_in']:.0f}, out {s['cycles_out']:.0f}, "
          f"gathered {s['cycles_gathered']:.0f}; {s['lookups_per_cycle']:.2f} lookups/cycle "
          f"on input (worst mini-batch {s['beats_per_cycle_min']:.3f} beats/cycle); "
          f"{s['rows_gathered']:.0f} rows gathered per mini-batch "
          f"({s['rows_gathered'] * cfg.row_bytes / (cfg.axi_data_bits // 8) / s['cycles_gathered']:.2f} "
          f"bus beats/cycle over 'gathered'); popular samples {s['popular_share']:.1%}")


if __name__ == "__main__":
    main()
