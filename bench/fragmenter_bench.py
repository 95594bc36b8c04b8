"""Throughput and latency of the mini-batch fragmenter, measured in Verilator.

For lanes 1, 2, 4 and 8 (the ``ulx3s`` preset's CAM, staging and de-dup sizes, or with
``--preset tiny`` the ``tiny`` preset's; in both, the key and sample widths are widened to
26 tables of 2**26 rows and 256-lookup samples, so that one build serves both traces: a
tiny design point's throughput is measured on its own memories, not on the ulx3s ones) it
runs ``sim/tb_fragmenter.py`` with no idle cycles and no backpressure on

* ``kaggle``: Criteo Kaggle-like one-hot samples (26 lookups), and
* ``dlrmv2``: MLPerf DLRMv2 multi-hot samples (214 lookups),

after learning 8 mini-batches and installing the popular set, so hits, misses, repeated rows
and staging refusals occur as in training. A fifth of the samples are rebuilt from installed
rows so that popular samples (which wait for their verdict) are part of the stream.

Printed per case: input beats per cycle over each mini-batch (first to last accepted beat;
minimum and mean over the mini-batches), effective lookups per cycle (lookups / cycles),
and the latency from a popular sample's last input beat to its first output beat. Every
run also checks every output record against the golden model.

    .venv/bin/python bench/fragmenter_bench.py            # 4 Verilator builds, ~10 min
    .venv/bin/python bench/fragmenter_bench.py --quick    # lanes 1 and 8 only
    .venv/bin/python bench/fragmenter_bench.py --lanes 16 # 16 lanes (a long Verilator build)
    .venv/bin/python bench/fragmenter_bench.py --preset tiny --lanes 8 16
    .venv/bin/python bench/fragmenter_bench.py --preset tiny --lanes 1 --set dedup_sets=2048
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hotline_hw.config import ConfigError, HotlineConfig, preset  # noqa: E402
from sim.runner import run_cocotb  # noqa: E402

CASES = {
    # workload: (mini-batches, samples per mini-batch); FAE trains Kaggle with 1024 samples
    # per mini-batch, MLPerf DLRMv2 with far more: these are smaller to keep runs short, so
    # the per-mini-batch cost (about 5 cycles at 8 lanes) weighs more than in training
    "kaggle": (8, 256),
    "dlrmv2": (6, 32),
}


#: The presets whose memory sizes the bench can measure (``--preset``).
BASES = ("ulx3s", "tiny")


def config(lanes, base="ulx3s", changes=None):
    """The measured configuration: ``base`` with ``lanes`` lanes, keys of 26 tables x 2**26
    rows and 256-lookup samples (the traces' keys and samples; the CAM, counter, staging and
    de-dup sizes stay the preset's unless ``changes``, ``{field: value}``, replaces them)."""
    name = f"fragbench-l{lanes}" if base == "ulx3s" else f"fragbench-{base}-l{lanes}"
    cfg = preset(base, name=name, lanes=lanes, table_bits=5, num_tables=26, row_bits=26,
                 max_sample_lookups=256)
    return cfg.replace(name=name + "-set", **changes) if changes else cfg


def run_case(lanes, workload, batches, batch_size, base="ulx3s", changes=None):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "report.json"
        env = {"HOTLINE_TB_WORKLOAD": workload, "HOTLINE_TB_BATCHES": str(batches),
               "HOTLINE_TB_BATCH_SIZE": str(batch_size), "HOTLINE_TB_IDLE": "0",
               "HOTLINE_TB_BACKPRESSURE": "0", "HOTLINE_TB_HOLES": "0",
               "HOTLINE_TB_REPORT": str(path)}
        run_cocotb("fragmenter", config(lanes, base, changes), sim="verilator",
                   test_module="sim.tb_fragmenter", extra_env=env, seed=1, timeout_s=3600)
        return json.loads(path.read_text())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="lanes 1 and 8 only")
    ap.add_argument("--lanes", type=int, nargs="+", metavar="N", choices=(1, 2, 4, 8, 16),
                    help="these lanes settings instead (1, 2, 4, 8 or 16)")
    ap.add_argument("--preset", choices=BASES, default="ulx3s",
                    help="whose CAM, counter, staging and de-dup sizes (default ulx3s)")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="replace a configuration field of the measured design (repeatable), "
                         "e.g. dedup_sets=2048")
    args = ap.parse_args(argv)
    try:
        changes = HotlineConfig.parse_changes(args.set)
        for lanes in args.lanes or (1,):
            cfg = config(lanes, args.preset, changes)       # (checked as it is made)
    except ConfigError as e:
        ap.exit(2, f"{ap.prog}: error: --set: {e}\n")
    if changes:
        print(f"measured with {', '.join(args.set)}: {cfg.summary()}", file=sys.stderr)
    if args.lanes:
        lanes_list = tuple(args.lanes)
    else:
        lanes_list = (1, 8) if args.quick else (1, 2, 4, 8)
    rows = []
    for lanes in lanes_list:
        for wl, (batches, bs) in CASES.items():
            t = time.time()
            r = run_case(lanes, wl, batches, bs, args.preset, changes)
            r["seconds"] = time.time() - t
            rows.append(r)
            print(f"  lanes {lanes} {wl}: done in {r['seconds']:.0f} s", file=sys.stderr)
    print("| lanes | trace | beats | hit rate | beats/cycle min | mean | lookups/cycle | "
          "popular-sample latency |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        c = r["counters"]
        lpc = r["lookups"] / r["beats"] * r["beats_per_cycle_mean"]
        lat = (f"{r['popular_latency_min']}..{r['popular_latency_max']}"
               if r["popular_latency_min"] is not None else "-")
        print(f"| {r['lanes']} | {r['workload']} | {r['beats']} | {c['hits'] / c['lookups']:.3f} "
              f"| {r['beats_per_cycle_min']:.3f} | {r['beats_per_cycle_mean']:.3f} | {lpc:.2f} "
              f"| {lat} |")


if __name__ == "__main__":
    main()
