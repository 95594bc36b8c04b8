"""A timing model of one training step: Hotline against the CPU-GPU hybrid baseline.

Everything here is **modelled, not measured**. The model turns per-mini-batch statistics of
the golden model (:class:`BatchStats`) into a modelled time per mini-batch for two systems:

**Baseline** (the Intel-optimised CPU-GPU hybrid DLRM, FAE's baseline). The embedding tables
live in CPU memory. Per mini-batch, serially and without overlap:

    t_base = lookups * c_cpu                       (CPU gathers and pools every lookup,
                                                    and later applies its sparse update)
           + 2 * samples * tables * dim * 4 / B    (pooled embeddings to the GPUs, their
                                                    gradients back)
           + samples * g / gpus  [+ o if samples]  (GPUs run the dense part)

**Hotline.** Popular rows live in GPU memory. Mini-batch ``i`` is split into a popular
micro-batch (``P_i`` samples) and a non-popular one (``N_i = samples - P_i``). While the GPUs
train the popular one, the accelerator's DMA first scatters the rows staged by mini-batch
``i - 1`` back to CPU memory, then gathers this mini-batch's unique non-popular rows into the
other staging bank; then the GPUs train the non-popular micro-batch; overflow lookups and bad
keys take the CPU path:

    t_pop_i  = P_i * g / gpus  [+ o if P_i > 0]
    t_np_i   = N_i * g / gpus  [+ o if N_i > 0]
    t_g_i    = staged_rows_i * row_bytes_i / (e * B)       gather
    t_s_i    = t_g_i                                        scatter (the same rows)
    t_ovf_i  = overflow_lookups_i * c_cpu + 2 * overflow_lookups_i * dim * 4 / B
    t_hot_i  = max(t_pop_i, t_s_{i-1} + t_g_i) + t_np_i + t_ovf_i,      t_s_{-1} = 0

Overlap rule: the scatter of mini-batch ``i - 1`` overlaps mini-batch ``i``'s popular phase
and shares the one DMA engine with mini-batch ``i``'s gather (scatter first, so a gather of
a row still waiting for its scatter sees the scattered value). The non-popular phase waits
for the gather. Whatever DMA time the popular phase does not cover,
``max(t_pop, t_s_{i-1} + t_g_i) - t_pop``, is exposed. Written as "``max(t_pop, t_g)`` plus
the scatter's residue", the residue is ``max(t_pop, t_s_{i-1} + t_g) - max(t_pop, t_g)``.
Gather and scatter times add because one DMA engine does both. The scatter of the last
mini-batch of a run has nothing to overlap with: it is added once to the totals (the *drain*).

**Ideal bound.** If every transfer and the CPU path overlapped GPU work perfectly, a step
would last as long as its busiest resource:

    t_ideal_i = max(t_pop_i + t_np_i, t_s_{i-1} + t_g_i, t_ovf_i)  <=  t_hot_i

**Link bytes** (both directions): baseline ``2 * samples * tables * dim * 4`` (pooled
embeddings and their gradients); Hotline ``2 * staged_rows * row_bytes`` (gathered and
scattered rows) ``+ 2 * overflow_lookups * dim * 4`` (the CPU path's pooled partial sums and
their gradients, one vector per lookup at most). Hotline's GPUs pool from HBM themselves, so
no other activations cross the link.

Symbols: ``B`` link bandwidth (:attr:`TimingParams.link_bytes_per_s`), ``e`` DMA efficiency,
``g`` GPU seconds per sample on one GPU, ``o`` fixed GPU time per training pass,
``c_cpu`` CPU seconds per lookup (:meth:`TimingParams.cpu_lookup_seconds`),
``dim = row_bytes // 4`` (fp32) unless given. ``docs/timing-model.md`` explains each formula,
where each default comes from, what the model leaves out, and how to calibrate it.

Two paths compute the same numbers: :func:`timing_report` is vectorised over a NumPy
structured array of mini-batches (or an iterable of :class:`BatchStats`), :func:`step_time`
models one mini-batch given the previous one's scatter time.
"""

import math
from dataclasses import dataclass, fields
from numbers import Integral, Real

import numpy as np

__all__ = [
    "BATCH_STATS_DTYPE", "MODEL_NOTICE", "BatchStats", "StepTime", "TimingParams", "TimingReport",
    "step_time", "stats_array", "timing_report",
]

#: What every report says first.
MODEL_NOTICE = "Modelled, not measured"

# TorchRec DLRM on Criteo 1TB: 5.37M samples/s on 8 A100s (WORKLOADS.md).
_TORCHREC_SAMPLES_PER_S = 5.37e6
_TORCHREC_GPUS = 8


@dataclass(frozen=True)
class TimingParams:
    """Parameters of the timing model. Every value can be overridden
    (``dataclasses.replace(params, gpus=4)`` re-validates).

    Parameters
    ----------
    link_bytes_per_s : float
        Usable payload bandwidth of the CPU-GPU link, bytes per second per direction.
        Default 29e9: "a PCIe Gen4 x16 link (~29 GB/s)" (WORKLOADS.md). The baseline's bulk
        copies of pooled embeddings run at this rate.
    dma_efficiency : float
        Fraction of ``link_bytes_per_s`` the accelerator's gather/scatter DMA achieves, in
        (0, 1]. Default 0.9, an ASSUMPTION until the DMA bench measures it.
    gpus : int
        GPUs training data-parallel. Default 8, the system of the TorchRec figure.
    gpu_sample_s : float
        Seconds one GPU spends per sample on a training pass. Default
        ``8 / 5.37e6`` = 1.49 us: TorchRec DLRM on Criteo 1TB runs 5.37M samples/s on 8
        A100s (WORKLOADS.md), i.e. 186 ns per sample for the 8-GPU system. That figure
        includes the GPU-side embedding work and the GPUs' communication, so it is an UPPER
        BOUND on the dense (MLP) time of that model. Step time scales as ``1 / gpus``
        (an ASSUMPTION: perfect data-parallel scaling).
    gpu_pass_s : float
        Fixed GPU time per training pass (kernel launches, optimizer step, synchronisation),
        seconds, >= 0. Charged once per non-empty micro-batch, so Hotline pays it twice per
        mini-batch with both kinds of sample and the baseline once. Default 0.0, an
        ASSUMPTION (no published number): calibrate by timing the GPU step at two batch sizes
        and extrapolating to zero samples.
    cpu_mem_bytes_per_s : float
        Sustained CPU memory bandwidth, bytes per second. Default 100e9, an ASSUMPTION (no
        published number in WORKLOADS.md; the order of a two-socket server's DRAM).
    cpu_random_efficiency : float
        Fraction of ``cpu_mem_bytes_per_s`` that random row accesses achieve, in (0, 1].
        Default 0.25, an ASSUMPTION.
    cpu_line_bytes : int
        CPU cache-line size, bytes: a row access moves whole lines. Default 64 (x86).
    cpu_lookup_s : float or None
        CPU seconds per lookup for gather-and-pool plus sparse update. ``None`` (default)
        derives it from the three values above (:meth:`cpu_lookup_seconds`). To calibrate,
        time ``torch.nn.EmbeddingBag`` forward + backward + SGD update on the target CPU for
        a mini-batch of known lookups and set the time per lookup here.

    Raises
    ------
    ValueError
        On a non-positive value (negative for ``gpu_pass_s``) or an efficiency above 1;
        the one-line message names the parameter.
    """

    link_bytes_per_s: float = 29e9
    dma_efficiency: float = 0.9
    gpus: int = _TORCHREC_GPUS
    gpu_sample_s: float = _TORCHREC_GPUS / _TORCHREC_SAMPLES_PER_S
    gpu_pass_s: float = 0.0
    cpu_mem_bytes_per_s: float = 100e9
    cpu_random_efficiency: float = 0.25
    cpu_line_bytes: int = 64
    cpu_lookup_s: float | None = None

    def __post_init__(self):
        def check(name, *, integer=False, zero_ok=False, at_most_one=False):
            v = getattr(self, name)
            kind = Integral if integer else Real
            if not isinstance(v, kind) or isinstance(v, bool) or not math.isfinite(v):
                raise ValueError(f"{name}={v!r}: must be a finite {'integer' if integer else 'number'}")
            if v < 0 or (v == 0 and not zero_ok):
                raise ValueError(f"{name}={v!r}: must be {'>= 0' if zero_ok else '> 0'}")
            if at_most_one and v > 1:
                raise ValueError(f"{name}={v!r}: must be <= 1")

        check("link_bytes_per_s")
        check("dma_efficiency", at_most_one=True)
        check("gpus", integer=True)
        check("gpu_sample_s")
        check("gpu_pass_s", zero_ok=True)
        check("cpu_mem_bytes_per_s")
        check("cpu_random_efficiency", at_most_one=True)
        check("cpu_line_bytes", integer=True)
        if self.cpu_lookup_s is not None:
            check("cpu_lookup_s")

    def cpu_lookup_seconds(self, row_bytes):
        """CPU seconds per lookup (gather-and-pool plus sparse update) for rows of
        ``row_bytes`` bytes (a scalar or an array).

        Unless :attr:`cpu_lookup_s` is set, a lookup moves its row three times (the gather
        reads it; the SGD update reads and writes it), each time as whole cache lines, at
        ``cpu_mem_bytes_per_s * cpu_random_efficiency``: an ASSUMPTION, bandwidth-bound,
        with no framework overhead.
        """
        if self.cpu_lookup_s is not None:
            return np.full(np.shape(row_bytes), self.cpu_lookup_s)
        lines = -(-np.asarray(row_bytes, dtype=np.int64) // self.cpu_line_bytes)
        return 3 * lines * self.cpu_line_bytes / (self.cpu_mem_bytes_per_s * self.cpu_random_efficiency)

    def summary(self):
        """One line with the values in use, assumptions labelled."""
        cpu = (f"{self.cpu_lookup_s * 1e9:.3g} ns/lookup (set)" if self.cpu_lookup_s is not None
               else f"{self.cpu_mem_bytes_per_s / 1e9:.3g} GB/s x {self.cpu_random_efficiency:g} "
                    f"random efficiency (ASSUMPTION)")
        return (f"link {self.link_bytes_per_s / 1e9:.3g} GB/s, DMA efficiency {self.dma_efficiency:g}"
                f"; {self.gpus} GPUs x {self.gpu_sample_s * 1e6:.3g} us/sample (upper bound)"
                f", {self.gpu_pass_s * 1e6:.3g} us/pass; CPU {cpu}")


@dataclass(frozen=True)
class BatchStats:
    """Statistics of one mini-batch, as the golden model counts them.

    Parameters
    ----------
    samples : int
        Samples in the mini-batch.
    popular_samples : int
        Samples all of whose lookups hit the popular set (the popular micro-batch).
    lookups : int
        Lookups in the mini-batch.
    popular_lookups : int
        Lookups in popular samples.
    hit_lookups : int
        Lookups that hit the popular set, in any sample (``>= popular_lookups``).
    staged_rows : int
        Unique non-popular rows gathered into the staging buffer (and scattered back).
    overflow_lookups : int
        Lookups served by the CPU path: misses beyond the staging capacity and bad keys.
    row_bytes : int
        Bytes per embedding row (>= 4: at least one fp32 element).

    Raises
    ------
    ValueError
        If a count is negative or the counts contradict each other
        (``popular_samples <= samples``, ``popular_lookups <= hit_lookups <= lookups``,
        ``staged_rows + overflow_lookups <= lookups - hit_lookups``).
    """

    samples: int
    popular_samples: int
    lookups: int
    popular_lookups: int
    hit_lookups: int
    staged_rows: int
    overflow_lookups: int
    row_bytes: int

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if not isinstance(v, Integral) or isinstance(v, bool):
                raise ValueError(f"{f.name}={v!r}: must be an integer")
            object.__setattr__(self, f.name, int(v))
        _check_stats({f.name: np.array([getattr(self, f.name)]) for f in fields(self)}, single=True)


#: NumPy structured dtype of a mini-batch record: the fields of :class:`BatchStats`, int64.
BATCH_STATS_DTYPE = np.dtype([(f.name, np.int64) for f in fields(BatchStats)])


def stats_array(stats):
    """The mini-batches ``stats`` (an iterable of :class:`BatchStats`) as a structured array
    of :data:`BATCH_STATS_DTYPE`."""
    names = BATCH_STATS_DTYPE.names
    return np.array([tuple(getattr(s, n) for n in names) for s in stats], dtype=BATCH_STATS_DTYPE)


def _check_stats(cols, single=False):
    """Raise ValueError naming the first field and mini-batch that break a rule."""

    def fail(bad, rule):
        where = "" if single else f"mini-batch {int(np.flatnonzero(bad)[0])}: "
        raise ValueError(f"{where}{rule}")

    for n in BATCH_STATS_DTYPE.names:
        if np.any(cols[n] < 0):
            fail(cols[n] < 0, f"{n} must be >= 0")
    rules = [
        (cols["row_bytes"] < 4, "row_bytes must be >= 4 (one fp32 element)"),
        (cols["popular_samples"] > cols["samples"], "popular_samples must be <= samples"),
        (cols["popular_lookups"] > cols["hit_lookups"], "popular_lookups must be <= hit_lookups"),
        (cols["hit_lookups"] > cols["lookups"], "hit_lookups must be <= lookups"),
        (cols["staged_rows"] + cols["overflow_lookups"] > cols["lookups"] - cols["hit_lookups"],
         "staged_rows + overflow_lookups must be <= lookups - hit_lookups"),
    ]
    for bad, rule in rules:
        if np.any(bad):
            fail(bad, rule)


def _gather_seconds(cols, params):
    """DMA seconds to gather (or to scatter) the staged rows of mini-batches ``cols``."""
    return cols["staged_rows"] * cols["row_bytes"] / (params.dma_efficiency * params.link_bytes_per_s)


def _parts(cols, prev_scatter_s, params, tables, dim):
    """The modelled times (s) and link bytes of mini-batches ``cols`` (field -> array), given
    the scatter time of the mini-batch before each. The formulas of the module docstring."""
    p = params
    row_bytes = cols["row_bytes"]
    pooled_bytes = 4 * (row_bytes // 4 if dim is None else dim)   # one pooled fp32 vector
    c_cpu = p.cpu_lookup_seconds(row_bytes)
    g = p.gpu_sample_s / p.gpus
    samples, popular = cols["samples"], cols["popular_samples"]
    nonpopular = samples - popular

    baseline_bytes = 2 * samples * tables * pooled_bytes
    baseline_cpu_s = cols["lookups"] * c_cpu
    baseline_link_s = baseline_bytes / p.link_bytes_per_s
    baseline_gpu_s = samples * g + p.gpu_pass_s * (samples > 0)

    gpu_popular_s = popular * g + p.gpu_pass_s * (popular > 0)
    gpu_nonpopular_s = nonpopular * g + p.gpu_pass_s * (nonpopular > 0)
    staged_bytes = cols["staged_rows"] * row_bytes
    gather_s = _gather_seconds(cols, p)
    overflow_bytes = 2 * cols["overflow_lookups"] * pooled_bytes
    overflow_s = cols["overflow_lookups"] * c_cpu + overflow_bytes / p.link_bytes_per_s
    dma_s = prev_scatter_s + gather_s
    hotline_s = np.maximum(gpu_popular_s, dma_s) + gpu_nonpopular_s + overflow_s
    ideal_s = np.maximum(np.maximum(gpu_popular_s + gpu_nonpopular_s, dma_s), overflow_s)
    return dict(
        baseline_cpu_s=baseline_cpu_s, baseline_link_s=baseline_link_s,
        baseline_gpu_s=baseline_gpu_s,
        baseline_s=baseline_cpu_s + baseline_link_s + baseline_gpu_s,
        gpu_popular_s=gpu_popular_s, gpu_nonpopular_s=gpu_nonpopular_s,
        gather_s=gather_s, scatter_s=gather_s, overflow_s=overflow_s,
        exposed_dma_s=np.maximum(dma_s - gpu_popular_s, 0.0),
        hotline_s=hotline_s, ideal_s=ideal_s,
        baseline_bytes=baseline_bytes, hotline_bytes=2 * staged_bytes + overflow_bytes,
    )


def _check_call(tables, dim):
    if not isinstance(tables, Integral) or isinstance(tables, bool) or tables <= 0:
        raise ValueError(f"tables={tables!r}: must be an integer > 0")
    if dim is not None and (not isinstance(dim, Integral) or isinstance(dim, bool) or dim <= 0):
        raise ValueError(f"dim={dim!r}: must be an integer > 0 or None")


@dataclass(frozen=True)
class StepTime:
    """Modelled (not measured) time of one mini-batch, from :func:`step_time`.

    Attributes
    ----------
    baseline_cpu_s, baseline_link_s, baseline_gpu_s : float
        Baseline CPU gather + update, link transfers, GPU pass; seconds.
    baseline_s : float
        Baseline step time, their sum; seconds.
    gpu_popular_s, gpu_nonpopular_s : float
        Hotline GPU time on the popular and the non-popular micro-batch; seconds.
    gather_s, scatter_s : float
        DMA time to gather this mini-batch's staged rows, and to scatter them later; seconds.
    overflow_s : float
        CPU path for overflow lookups and bad keys, with its link transfers; seconds.
    exposed_dma_s : float
        DMA time (previous scatter + this gather) not hidden by the popular phase; seconds.
    hotline_s : float
        Hotline step time ``gpu_popular_s + gpu_nonpopular_s + exposed_dma_s + overflow_s``.
    ideal_s : float
        Fully overlapped bound on ``hotline_s``; seconds.
    baseline_bytes, hotline_bytes : float
        Bytes over the link, both directions: the baseline's pooled embeddings and their
        gradients; Hotline's gathered and scattered rows plus the CPU path's pooled partial
        sums and their gradients.
    """

    baseline_cpu_s: float
    baseline_link_s: float
    baseline_gpu_s: float
    baseline_s: float
    gpu_popular_s: float
    gpu_nonpopular_s: float
    gather_s: float
    scatter_s: float
    overflow_s: float
    exposed_dma_s: float
    hotline_s: float
    ideal_s: float
    baseline_bytes: float
    hotline_bytes: float


def step_time(stats, *, tables, params=None, dim=None, prev_scatter_s=0.0):
    """Model one mini-batch (the per-batch path).

    Parameters
    ----------
    stats : BatchStats
        The mini-batch.
    tables : int
        Embedding tables of the model (pooled vectors per sample).
    params : TimingParams, optional
        Model parameters; the defaults if omitted.
    dim : int, optional
        Embedding dimension (fp32 elements); ``stats.row_bytes // 4`` if omitted.
    prev_scatter_s : float
        Scatter time of the previous mini-batch (its :attr:`StepTime.scatter_s`), which
        overlaps this one's popular phase; 0 for the first mini-batch of a run. Seconds.

    Returns
    -------
    StepTime
    """
    _check_call(tables, dim)
    if not isinstance(prev_scatter_s, Real) or not prev_scatter_s >= 0:
        raise ValueError(f"prev_scatter_s={prev_scatter_s!r}: must be >= 0")
    cols = {n: np.int64(getattr(stats, n)) for n in BATCH_STATS_DTYPE.names}
    parts = _parts(cols, float(prev_scatter_s), params or TimingParams(), tables, dim)
    return StepTime(**{k: float(v) for k, v in parts.items()})


@dataclass(frozen=True, eq=False)
class TimingReport:
    """Modelled (not measured) times of a run of mini-batches, from :func:`timing_report`.

    Attributes
    ----------
    stats : ndarray
        The mini-batches (:data:`BATCH_STATS_DTYPE`).
    params : TimingParams
        The parameters used.
    tables : int
        Embedding tables of the model.
    per_batch : dict of str to ndarray
        Per mini-batch, the quantities of :class:`StepTime` (same names, seconds or bytes).
    """

    stats: np.ndarray
    params: TimingParams
    tables: int
    per_batch: dict

    @property
    def baseline_s(self):
        """Baseline per mini-batch, seconds."""
        return self.per_batch["baseline_s"]

    @property
    def hotline_s(self):
        """Hotline per mini-batch (excluding the final drain), seconds."""
        return self.per_batch["hotline_s"]

    @property
    def drain_s(self):
        """Scatter of the last mini-batch, which nothing overlaps; seconds."""
        return float(self.per_batch["scatter_s"][-1]) if len(self.stats) else 0.0

    @property
    def total_baseline_s(self):
        """Baseline run time, seconds."""
        return float(self.baseline_s.sum())

    @property
    def total_hotline_s(self):
        """Hotline run time including the final drain, seconds."""
        return float(self.hotline_s.sum()) + self.drain_s

    @property
    def total_ideal_s(self):
        """Fully overlapped bound on :attr:`total_hotline_s`, seconds."""
        return float(self.per_batch["ideal_s"].sum()) + self.drain_s

    @property
    def speedup(self):
        """Modelled baseline time over modelled Hotline time (``nan`` for an empty run)."""
        return self.total_baseline_s / self.total_hotline_s if self.total_hotline_s else math.nan

    @property
    def ideal_speedup(self):
        """Baseline time over the fully overlapped Hotline bound."""
        return self.total_baseline_s / self.total_ideal_s if self.total_ideal_s else math.nan

    @property
    def baseline_bytes(self):
        """Bytes the baseline moves over the link, both directions."""
        return float(self.per_batch["baseline_bytes"].sum())

    @property
    def hotline_bytes(self):
        """Bytes Hotline moves over the link, both directions."""
        return float(self.per_batch["hotline_bytes"].sum())

    def total(self, name):
        """Sum over the run of the per-batch quantity ``name``."""
        return float(self.per_batch[name].sum())

    def format(self):
        """A short human-readable report; its first line says it is a model."""
        s = {n: int(self.stats[n].sum()) for n in BATCH_STATS_DTYPE.names}
        ms = 1e3
        t = self.total

        def pct(a, b):
            return f"{100 * a / b:.1f}%" if b else "n/a"

        return "\n".join([
            f"{MODEL_NOTICE}: training-step time of Hotline vs the CPU-GPU hybrid baseline.",
            f"  workload: {len(self.stats)} mini-batches, {s['samples']} samples "
            f"({pct(s['popular_samples'], s['samples'])} popular), {s['lookups']} lookups "
            f"({pct(s['hit_lookups'], s['lookups'])} hit), {s['staged_rows']} staged rows, "
            f"{s['overflow_lookups']} CPU-path lookups, {self.tables} tables",
            f"  baseline: {self.total_baseline_s * ms:.3f} ms = CPU {t('baseline_cpu_s') * ms:.3f}"
            f" + link {t('baseline_link_s') * ms:.3f} + GPU {t('baseline_gpu_s') * ms:.3f} (serial)",
            f"  Hotline:  {self.total_hotline_s * ms:.3f} ms = GPU "
            f"{(t('gpu_popular_s') + t('gpu_nonpopular_s')) * ms:.3f} + exposed DMA "
            f"{(t('exposed_dma_s') + self.drain_s) * ms:.3f} + CPU path {t('overflow_s') * ms:.3f}",
            f"  fully overlapped bound: {self.total_ideal_s * ms:.3f} ms",
            f"  speedup: {_times(self.speedup)} (bound {_times(self.ideal_speedup)})",
            f"  link bytes: baseline {self.baseline_bytes / 1e6:.3f} MB, "
            f"Hotline {self.hotline_bytes / 1e6:.3f} MB",
            f"  parameters: {self.params.summary()}",
        ])


def _times(ratio):
    return "n/a" if math.isnan(ratio) else f"{ratio:.2f}x"


def timing_report(stats, *, tables, params=None, dim=None):
    """Model a run of mini-batches (the vectorised path).

    Parameters
    ----------
    stats : ndarray or iterable of BatchStats
        The mini-batches in training order: a structured array with the fields of
        :data:`BATCH_STATS_DTYPE` (any integer types), or :class:`BatchStats` records.
    tables : int
        Embedding tables of the model (pooled vectors per sample).
    params : TimingParams, optional
        Model parameters; the defaults if omitted.
    dim : int, optional
        Embedding dimension (fp32 elements); ``row_bytes // 4`` of each mini-batch if omitted.

    Returns
    -------
    TimingReport

    Raises
    ------
    ValueError
        If ``tables`` or ``dim`` is not a positive integer, a field is missing, or a
        mini-batch breaks a rule of :class:`BatchStats` (the message names it).
    """
    _check_call(tables, dim)
    if isinstance(stats, np.ndarray):
        have = stats.dtype.names or ()
        missing = [n for n in BATCH_STATS_DTYPE.names if n not in have]
        if missing or stats.ndim != 1:
            raise ValueError(f"stats: must be a 1-D structured array with the fields of BatchStats"
                             + (f" (lacks {', '.join(missing)})" if missing else ""))
        arr = np.empty(len(stats), dtype=BATCH_STATS_DTYPE)
        for n in BATCH_STATS_DTYPE.names:
            arr[n] = stats[n]
        _check_stats({n: arr[n] for n in BATCH_STATS_DTYPE.names})
    else:
        arr = stats_array(stats)
    cols = {n: arr[n] for n in BATCH_STATS_DTYPE.names}
    params = params or TimingParams()
    prev_scatter_s = np.concatenate([[0.0], _gather_seconds(cols, params)[:-1]])
    parts = _parts(cols, prev_scatter_s, params, tables, dim)
    return TimingReport(stats=arr, params=params, tables=int(tables),
                        per_batch={k: np.asarray(v, dtype=np.float64) for k, v in parts.items()})
