#!/usr/bin/env python3
"""Throughput of the golden models and coverage of the hardware's popular set.

    .venv/bin/python bench/golden_bench.py [--lookups 10000000] [--json]

Prints, for a synthetic Criteo Kaggle trace (WORKLOADS.md recipe, Zipf 1.1):
  * trace generation time;
  * the algorithmic reference: exact profile + top-N + per-batch fragmentation statistics;
  * the bit-accurate model: the counter array learning every lookup, then the fragmenter
    (CAM lookup, classification, de-dup, records) training every mini-batch;
and, for the `kaggle` preset at Zipf 1.05 / 1.1 / 1.2, the lookup coverage of the
hardware model's popular set relative to the exact top-N at equal capacity (the first tenth
of the trace is the learning phase, coverage is measured on the rest).

Each throughput is the best of three runs (the first run of a process also pays for
faulting in fresh memory, which is slow in sandboxed VMs); wall-clock figures depend on the
machine.
"""

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from golden import algorithmic, synth                      # noqa: E402
from golden.analysis import analyse                        # noqa: E402
from golden.model import HotlineModel                      # noqa: E402
from hotline_hw.config import preset                       # noqa: E402
from hotline_hw.tuning import keep_freed_memory            # noqa: E402


REPEAT = 3


def timed(fn, repeat=1):
    """``fn()``'s result and its best wall time over ``repeat`` runs."""
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return out, best


def throughput(lookups, zipf, cfg):
    tr, t_gen = timed(lambda: synth.generate("kaggle", lookups=lookups, zipf=zipf, seed=1))
    n = tr.n_lookups

    def algo():
        dense = tr.dense_index()
        prof = algorithmic.profile(tr, cfg.cam_entries, dense=dense, threshold=cfg.learn_threshold)
        return algorithmic.batch_stats(tr, prof.popular, dense=dense)
    _, t_algo = timed(algo, REPEAT)

    keys = tr.keys(cfg)
    loff, soff = tr.batch_lookup_offsets, tr.batch_sample_offsets
    model = HotlineModel(cfg)

    def learn():
        model.start_learning(clear=True)
        for b in range(tr.n_batches):
            model.minibatch(keys[loff[b]:loff[b + 1]], None, learn=True, train=False)
        return model.install()
    _, t_learn = timed(learn, REPEAT)

    def train():
        model.soft_reset()
        for b in range(tr.n_batches):
            r = model.minibatch(keys[loff[b]:loff[b + 1]], tr.sample_lengths[soff[b]:soff[b + 1]])
            model.scatter(r.bank)
    _, t_train = timed(train, REPEAT)
    return {
        "lookups": n, "batches": tr.n_batches, "generate_s": t_gen,
        "algorithmic_lookups_per_s": n / t_algo,
        "bit_accurate_learn_lookups_per_s": n / t_learn,
        "bit_accurate_train_lookups_per_s": n / t_train,
        "bit_accurate_learn_and_train_lookups_per_s": 2 * n / (t_learn + t_train),
    }


def coverage(lookups, cfg, zipfs):
    out = {}
    for z in zipfs:
        tr = synth.generate("kaggle", lookups=lookups, zipf=z, seed=2)
        a = analyse(tr, cfg)
        out[str(z)] = {"ratio": a.coverage_ratio, "exact": a.exact["lookup_coverage"],
                       "hardware": a.hardware["lookup_coverage"], "installed": a.installed,
                       "skipped": a.install_skipped}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lookups", type=int, default=10_000_000)
    ap.add_argument("--coverage-lookups", type=int, default=10_000_000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    keep_freed_memory()
    cfg = preset("kaggle")
    res = {"throughput": throughput(args.lookups, 1.1, cfg),
           "coverage": coverage(args.coverage_lookups, cfg, (1.05, 1.1, 1.2))}
    if args.json:
        print(json.dumps(res, indent=2))
        return
    t = res["throughput"]
    print(f"golden model throughput, kaggle trace of {t['lookups']:,} lookups "
          f"({t['batches']} mini-batches), `kaggle` preset")
    print(f"  trace generation                  {t['generate_s']:8.2f} s")
    print(f"  algorithmic (profile + fragment)  {t['algorithmic_lookups_per_s'] / 1e6:8.2f} M lookups/s"
          f"   (target >= 20)")
    print(f"  bit-accurate LEARN (counters)     {t['bit_accurate_learn_lookups_per_s'] / 1e6:8.2f} M lookups/s")
    print(f"  bit-accurate TRAIN (fragmenter)   {t['bit_accurate_train_lookups_per_s'] / 1e6:8.2f} M lookups/s")
    print(f"  bit-accurate LEARN+TRAIN          {t['bit_accurate_learn_and_train_lookups_per_s'] / 1e6:8.2f} M lookups/s"
          f"   (target >= 1)")
    print()
    print("coverage of the hardware's popular set vs the exact top-N (`kaggle` preset, "
          f"capacity {cfg.cam_entries})")
    print("  zipf   exact    hardware  ratio   (target >= 0.98)")
    for z, c in res["coverage"].items():
        print(f"  {z:5}  {c['exact']:.4f}   {c['hardware']:.4f}    {c['ratio']:.4f}")


if __name__ == "__main__":
    main()
