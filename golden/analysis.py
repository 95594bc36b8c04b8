"""What `hotline-hw golden` reports: a trace through the algorithmic reference and through
the bit-accurate hardware model, side by side, and the modelled speedup.

The trace is split in two: the first ``learn_batches`` mini-batches are the learning phase
(every ``learn_period``-th is sampled, by both models), the rest are trained. Both models
choose a popular set of the same capacity (``cam_entries`` rows) from the same samples: the
reference by exact counts, the hardware model with its counter array, install policy and
CAM. Coverage is measured on the trained mini-batches.
"""

import math
from dataclasses import dataclass, field

import numpy as np

from . import algorithmic
from .model import HotlineModel
from .timing import BATCH_STATS_DTYPE, TimingParams, timing_report

__all__ = ["Analysis", "analyse"]


def _progress(iterable, total, desc, enabled):
    if not enabled:
        return iterable
    from tqdm import tqdm
    return tqdm(iterable, total=total, desc=desc, unit="batch", leave=False)


@dataclass
class Analysis:
    """Figures of one trace under one configuration (see :func:`analyse`)."""
    trace: str
    config: str
    learn_batches: int
    sampled_batches: int
    train_batches: int
    capacity: int
    exact: dict
    hardware: dict
    installed: int
    install_skipped: int
    timing: object = field(repr=False)
    timing_exact: object = field(repr=False)

    @property
    def coverage_ratio(self):
        e = self.exact["lookup_coverage"]
        return self.hardware["lookup_coverage"] / e if e else math.nan

    def as_dict(self):
        return {
            "trace": self.trace, "config": self.config, "learn_batches": self.learn_batches,
            "sampled_batches": self.sampled_batches, "train_batches": self.train_batches,
            "capacity": self.capacity, "installed": self.installed,
            "install_skipped": self.install_skipped, "exact": self.exact, "hardware": self.hardware,
            "coverage_ratio": self.coverage_ratio,
            "modelled": {"speedup": self.timing.speedup, "ideal_speedup": self.timing.ideal_speedup,
                         "speedup_exact_popular_set": self.timing_exact.speedup,
                         "baseline_bytes": self.timing.baseline_bytes,
                         "hotline_bytes": self.timing.hotline_bytes},
        }

    def _notes(self):
        h = self.hardware
        if h["popular_sample_fraction"] >= 0.01 or h["lookup_coverage"] == 0:
            return []
        return ["note: a sample is popular only if every one of its lookups hits; with "
                f"{100 * h['lookup_coverage']:.0f}% of lookups hitting, few samples are. "
                "Tables that are read uniformly (the synthetic recipe reads tables of <= 100k "
                "rows uniformly) are covered only by a popular set larger than them."]

    def format(self):
        e, h = self.exact, self.hardware

        def pct(x):
            return f"{100 * x:6.2f}%"

        lines = [
            f"trace:   {self.trace}",
            f"config:  {self.config}",
            f"learning: {self.learn_batches} mini-batches, {self.sampled_batches} sampled; "
            f"training: {self.train_batches} mini-batches",
            f"popular set: capacity {self.capacity} rows; hardware installed {self.installed}"
            f" ({self.install_skipped} skipped: CAM set full)",
            "",
            f"{'':34}{'exact top-N':>14}{'hardware':>14}",
            f"{'lookup coverage by popular set':34}{pct(e['lookup_coverage']):>14}{pct(h['lookup_coverage']):>14}",
            f"{'popular-sample fraction':34}{pct(e['popular_sample_fraction']):>14}{pct(h['popular_sample_fraction']):>14}",
            f"{'unique non-popular rows / batch':34}{e['unique_rows_mean']:>14.1f}{h['unique_rows_mean']:>14.1f}",
            f"{'  max over batches':34}{e['unique_rows_max']:>14d}{h['unique_rows_max']:>14d}",
            f"{'CPU-path (overflow) lookups':34}{pct(e['overflow_fraction']):>14}{pct(h['overflow_fraction']):>14}",
            f"coverage ratio hardware / exact top-N: {self.coverage_ratio:.4f}",
            *self._notes(),
            "",
            self.timing.format(),
            f"  (with the exact top-N set and unlimited staging: speedup "
            f"{self.timing_exact.speedup:.2f}x)",
        ]
        return "\n".join(lines)


def analyse(trace, cfg, *, learn_batches=None, learn_period=None, threshold=None,
            timing_params=None, progress=False):
    """Run ``trace`` through both models.

    Parameters
    ----------
    trace : golden.trace.Trace
    cfg : HotlineConfig
    learn_batches : int, optional
        Mini-batches of the learning phase (default: a tenth of the trace, at least 1).
    learn_period, threshold : int, optional
        LEARN_PERIOD and LEARN_THRESHOLD (default: the configuration's reset values).
    timing_params : golden.timing.TimingParams, optional
    progress : bool
        Show progress bars.
    """
    trace.check_fits(cfg)
    nb = trace.n_batches
    if learn_batches is None:
        learn_batches = max(1, nb // 10)
    learn_batches = min(learn_batches, nb - 1) if nb > 1 else nb
    period = cfg.learn_period if learn_period is None else learn_period
    thr = cfg.learn_threshold if threshold is None else threshold
    cfg = cfg.replace(learn_period=period, learn_threshold=thr)
    keys = trace.keys(cfg)
    dense = trace.dense_index()
    loff = trace.batch_lookup_offsets
    soff = trace.batch_sample_offsets
    train = trace.batches(learn_batches)
    dense_train = dense[loff[learn_batches]:]

    # --- the reference ------------------------------------------------------------------
    prof = algorithmic.profile(trace, cfg.cam_entries, learn_batches=learn_batches,
                               learn_period=period, threshold=thr, dense=dense)
    ex = algorithmic.batch_stats(train, prof.popular, dense=dense_train)
    ex_stats = np.zeros(train.n_batches, dtype=BATCH_STATS_DTYPE)
    ex_stats["samples"] = ex["samples"]
    ex_stats["popular_samples"] = ex["popular_samples"]
    ex_stats["lookups"] = ex["lookups"]
    ex_stats["popular_lookups"] = ex["popular_lookups"]
    ex_stats["hit_lookups"] = ex["hit_lookups"]
    ex_stats["staged_rows"] = ex["unique_misses"]
    ex_stats["overflow_lookups"] = ex["bad_lookups"]
    ex_stats["row_bytes"] = cfg.row_bytes

    # --- the hardware model -------------------------------------------------------------
    model = HotlineModel(cfg)
    model.start_learning()
    lens = trace.sample_lengths
    for b in _progress(range(learn_batches), learn_batches, "learn (bit-accurate)", progress):
        model.minibatch(keys[loff[b]:loff[b + 1]], None, learn=True, train=False)
    inst = model.install()
    hw_stats = np.zeros(train.n_batches, dtype=BATCH_STATS_DTYPE)
    hw_unique = np.zeros(train.n_batches, dtype=np.int64)
    for i, b in enumerate(_progress(range(learn_batches, nb), nb - learn_batches,
                                    "train (bit-accurate)", progress)):
        res = model.minibatch(keys[loff[b]:loff[b + 1]], lens[soff[b]:soff[b + 1]])
        model.scatter(res.bank)
        c = res.counters
        row = hw_stats[i]
        row["samples"] = c.popular_samples + c.nonpopular_samples
        row["popular_samples"] = c.popular_samples
        row["lookups"] = c.lookups
        row["popular_lookups"] = int(res.popular.lengths.sum())
        row["hit_lookups"] = c.hits
        row["staged_rows"] = c.staged_rows
        row["overflow_lookups"] = c.overflows
        hw_unique[i] = res.unique_misses
    hw_stats["row_bytes"] = cfg.row_bytes

    def summary(st, unique):
        lk = max(1, int(st["lookups"].sum()))
        return {
            "lookup_coverage": float(st["hit_lookups"].sum()) / lk,
            "popular_sample_fraction": float(st["popular_samples"].sum()) / max(1, int(st["samples"].sum())),
            "unique_rows_mean": float(np.mean(unique)) if len(unique) else 0.0,
            "unique_rows_max": int(np.max(unique)) if len(unique) else 0,
            "overflow_fraction": float(st["overflow_lookups"].sum()) / lk,
            "staged_rows": int(st["staged_rows"].sum()),
        }

    exact = summary(ex_stats, ex["unique_misses"])
    # unique non-popular rows the hardware saw: staged ones and refused ones
    hardware = summary(hw_stats, hw_unique)
    hardware["staging_full"] = model.totals.staging_full
    hardware["dedup_full"] = model.totals.dedup_full
    hardware["bad_keys"] = model.totals.bad_keys
    tp = timing_params or TimingParams()
    return Analysis(
        trace=trace.describe(), config=f"{cfg.name}: {cfg.summary()}",
        learn_batches=learn_batches, sampled_batches=model.sampled,
        train_batches=train.n_batches, capacity=cfg.cam_entries, exact=exact, hardware=hardware,
        installed=len(inst.keys), install_skipped=inst.skipped,
        timing=timing_report(hw_stats, tables=trace.num_tables, params=tp),
        timing_exact=timing_report(ex_stats, tables=trace.num_tables, params=tp))
