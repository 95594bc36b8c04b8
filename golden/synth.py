"""Synthetic embedding-lookup traces with Zipf-skewed rows.

The recipe follows ``WORKLOADS.md`` (peers' generators: HugeCTR, UGache): every table draws
its rows independently from a **bounded Zipf** law over its ``N`` rows,
``P(rank r) = r**-s / H(N, s)`` for ``r = 1..N``, when it has more than
``Workload.uniform_below`` rows, and uniformly otherwise. Sampling is exact, by
rejection-inversion (:func:`_zipf_ranks`), in O(1) memory whatever ``N``.

Popularity ranks are not row numbers: rank ``r`` (0-based, 0 the hottest) of table ``t``
lives at row ``P_t(r)``, where ``P_t`` is a pseudo-random permutation of ``range(N)``: a
4-round Feistel network over ``2 * h`` bits (``h = ceil(bits(N - 1) / 2)``) with keys drawn
from the table's random stream, restricted to ``[0, N)`` by cycle walking. It needs no
memory (a shuffled index of a 40M-row table would take 320 MB) and, unlike an affine map
``a * r + b mod N``, puts no arithmetic structure into the hot set that the accelerator's
GF(2)-linear H3 hashes could resonate with. :func:`rows_of_ranks` evaluates ``P_t``.
Uniform tables are not permuted.

Random streams are independent of generation order: table ``t`` draws from
``SeedSequence(seed, spawn_key=(0, t))`` (its permutation keys, then all its lookups in
sample order, in fixed chunks of 65,536) and bad keys from streams of their own, so one
table's draws do not depend on the other tables, and the same arguments always give the
same trace.
"""

import math
import numbers
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from golden.trace import Trace, TraceError

__all__ = ["Workload", "WORKLOADS", "generate", "rows_of_ranks"]


@dataclass(frozen=True)
class Workload:
    """The shape of a recommendation model's input: its tables and mini-batches.

    Parameters
    ----------
    name : str
        Preset name.
    cardinalities : tuple of int
        Rows of each embedding table.
    lookups_per_table : tuple of int
        Lookups of each table in one sample (1 for one-hot; the multi-hot bag size otherwise).
    batch_size : int
        Default samples per mini-batch.
    source : str
        Where the numbers come from.
    uniform_below : int
        Tables with at most this many rows are read uniformly; larger ones follow Zipf.
    """

    name: str
    cardinalities: tuple
    lookups_per_table: tuple
    batch_size: int
    source: str
    uniform_below: int = 100_000

    def __post_init__(self):
        if not self.cardinalities or len(self.cardinalities) != len(self.lookups_per_table) \
                or min(self.cardinalities) < 1 or min(self.lookups_per_table) < 1 \
                or self.batch_size < 1:
            raise TraceError(f"workload {self.name!r}: needs one cardinality and one lookup "
                             f"count (all >= 1) per table and a batch size >= 1")

    @property
    def num_tables(self):
        return len(self.cardinalities)

    @property
    def lookups_per_sample(self):
        return sum(self.lookups_per_table)


_KAGGLE = (1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194,
           27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572)
_TERABYTE = (39884406, 39043, 17289, 7420, 20263, 3, 7120, 1543, 63, 38532951, 2953546,
             403346, 10, 2208, 11938, 155, 4, 976, 14, 39979771, 25641295, 39664984, 585935,
             12972, 108, 36)
_DLRMV2_BAGS = (3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3,
                1, 1)

#: The named workloads (numbers from ``WORKLOADS.md``).
WORKLOADS = {w.name: w for w in (
    Workload("kaggle", _KAGGLE, (1,) * 26, 1024,
             "Criteo Kaggle cardinalities (facebookresearch/dlrm tools/visualize.py); "
             "one-hot; FAE mini-batch 1024"),
    Workload("terabyte", _TERABYTE, (1,) * 26, 2048,
             "Criteo 1TB, MLPerf v1 40M cap; one-hot; MLPerf v1 mini-batch 2048"),
    # MLPerf DLRMv2 trains with a global batch of 65536; 2048 keeps traces manageable.
    Workload("dlrmv2", _TERABYTE, _DLRMV2_BAGS, 2048,
             "Criteo 1TB 40M cap with MLPerf DLRMv2 multi-hot bags (214 lookups per sample); "
             "mini-batch 2048 (MLPerf's global batch is 65536)"),
    Workload("taobao", (987_994, 4_162_024, 9_439), (1, 20, 20), 256,
             "Taobao as used by TBSM/FAE: 1 user, 20 items and 20 categories of history; "
             "mini-batch 256"),
    Workload("tiny", (1000, 200, 24), (1, 1, 1), 16,
             "fits the tiny configuration (2-bit table ids, 10-bit rows); Zipf on all tables",
             uniform_below=0),
)}

_ROUNDS = 4
_CHUNK = 1 << 16  # draws per NumPy pass; part of the stream definition for Zipf tables
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _stream(seed, *key):
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=key)))


def _table_stream(seed, table):
    """The random stream of ``table`` and its Feistel keys (drawn first from that stream)."""
    rng = _stream(seed, 0, table)
    return rng, rng.integers(2**64, size=_ROUNDS, dtype=np.uint64)


def _feistel(x, half, keys):
    """One pass of the Feistel network over ``2 * half``-bit values ``x`` (uint64)."""
    mask = np.uint64((1 << half) - 1)
    shift = np.uint64(half)
    left, right = x >> shift, x & mask
    z, t = np.empty_like(x), np.empty_like(x)
    for k in keys:  # round function: SplitMix64's finaliser of right ^ key
        np.bitwise_xor(right, k, out=z)
        z *= _MIX1
        np.right_shift(z, np.uint64(31), out=t)
        z ^= t
        z *= _MIX2
        np.right_shift(z, np.uint64(29), out=t)
        z ^= t
        z &= mask
        z ^= left
        left, right, z = right, z, left
    left <<= shift
    left |= right
    return left


def _permute(ranks, n, keys):
    """``P(ranks)`` for the Feistel permutation of ``range(n)`` keyed by ``keys``."""
    half = max(1, ((n - 1).bit_length() + 1) // 2)
    rows = _feistel(ranks.astype(np.uint64, copy=False), half, keys)
    walk = np.flatnonzero(rows >= n)
    while walk.size:  # cycle walking: re-encrypt until back inside [0, n)
        rows[walk] = _feistel(rows[walk], half, keys)
        walk = walk[rows[walk] >= n]
    return rows


def rows_of_ranks(ranks, *, cardinality, table, seed=0):
    """The rows holding popularity ranks ``ranks`` of a Zipf table in traces of ``seed``
    (uniform tables are not permuted: every row is equally popular).

    Parameters
    ----------
    ranks : array_like of int
        0-based popularity ranks (0 is the hottest row), each ``< cardinality``.
    cardinality : int
        Rows of the table.
    table : int
        Table index in its workload.
    seed : int
        Trace seed given to :func:`generate`.

    Returns
    -------
    ndarray of uint64
    """
    _, keys = _table_stream(seed, table)
    return _permute(np.asarray(ranks, dtype=np.uint64), cardinality, keys)


def _expm1_over(x):
    """``expm1(x) / x``, 1 at 0."""
    small = np.abs(x) < 1e-8
    safe = np.where(small, 1.0, x)
    return np.where(small, 1 + x / 2 * (1 + x / 3 * (1 + x / 4)), np.expm1(safe) / safe)


def _log1p_over(x):
    """``log1p(x) / x``, 1 at 0."""
    small = np.abs(x) < 1e-8
    safe = np.where(small, 1.0, x)
    with np.errstate(divide="ignore"):  # log1p(-1) = -inf is the right limit
        return np.where(small, 1 - x * (1 / 2 - x * (1 / 3 - x / 4)), np.log1p(safe) / safe)


def _zipf_ranks(rng, n, s, count):
    """``count`` 0-based ranks drawn exactly from the bounded Zipf law ``P(r) ~ r**-s``
    over ranks ``1..n``, by rejection-inversion (Hörmann and Derflinger, "Rejection-inversion
    to generate variates from monotone discrete distributions", 1996; the same algorithm as
    Apache Commons RNG's ``RejectionInversionZipfSampler``). It needs O(1) memory and time
    per draw whatever ``n`` (a CDF of a 40M-row table is 320 MB); about 2 draws in 100 at
    most are rejected and redrawn."""
    def h(x):
        return np.exp(-s * np.log(x))

    def h_integral(x):  # integral of h from 1 to x, stable near s = 1
        log_x = np.log(x)
        return _expm1_over((1 - s) * log_x) * log_x

    def h_integral_inverse(y):
        return np.exp(_log1p_over(np.maximum(y * (1 - s), -1.0)) * y)

    lo = h_integral(1.5) - 1.0
    hi = h_integral(n + 0.5)
    squeeze = 2 - h_integral_inverse(h_integral(2.5) - h(2.0))
    ranks = np.empty(count, dtype=np.uint64)
    todo = np.arange(count)
    while todo.size:
        u = hi + rng.random(todo.size) * (lo - hi)
        x = h_integral_inverse(u)
        k = np.clip(np.floor(x + 0.5), 1, n)
        ok = (k - x <= squeeze) | (u >= h_integral(k + 0.5) - h(k))
        ranks[todo[ok]] = k[ok] - 1
        todo = todo[~ok]
    return ranks


def _table_rows(seed, table, n, count, s, dtype):
    """``count`` rows of table ``table`` (``n`` rows): Zipf of exponent ``s`` through the
    table's permutation, or uniform if ``s`` is None (every row equally popular: nothing to
    permute). Drawn in chunks of :data:`_CHUNK` so that the temporaries stay in cache
    (2-3x faster on a 100-lookup bag of 2048 samples)."""
    rng, keys = _table_stream(seed, table)
    out = np.empty(count, dtype=dtype)
    for start in range(0, count, _CHUNK):
        size = min(_CHUNK, count - start)
        if s is None:
            out[start:start + size] = rng.integers(n, size=size, dtype=dtype)
        else:
            out[start:start + size] = _permute(_zipf_ranks(rng, n, s, size), n, keys)
    return out


def _bad(name, value, why):
    return TraceError(f"generate: {name}={value!r}: {why}")


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise _bad(name, value, "must be a positive integer")
    return int(value)


def generate(workload="kaggle", *, batches=None, lookups=None, zipf=1.1, batch_size=None,
             seed=0, bad_key_rate=0.0, table_bits=None, progress=False):
    """A synthetic trace of whole mini-batches of ``workload``.

    Every sample holds table 0's lookups, then table 1's, ...; a multi-hot table's lookups
    are consecutive and drawn independently (a bag may repeat a row).

    Parameters
    ----------
    workload : str or Workload
        A name of :data:`WORKLOADS` or a custom :class:`Workload`.
    batches : int, optional
        Mini-batches to generate.
    lookups : int, optional
        Approximate lookups to generate instead, rounded up to whole mini-batches. With
        neither ``batches`` nor ``lookups``, one mini-batch.
    zipf : float
        Zipf exponent ``s`` of the tables above ``workload.uniform_below`` rows.
    batch_size : int, optional
        Samples per mini-batch; the workload's default if omitted.
    seed : int
        Seed (non-negative) of every random stream; same seed, same trace.
    bad_key_rate : float
        Fraction in ``[0, 1)`` of lookups replaced by bad keys: a table id in
        ``[num_tables, 2**table_bits)`` and a row below ``2**bits(max(cardinalities) - 1)``,
        so the key still fits the key format. Each lookup is replaced independently with
        this probability.
    table_bits : int, optional
        Table-id bits of the key format the bad keys must fit. Default:
        ``num_tables.bit_length()``, the fewest bits that hold every table id and leave at
        least one invalid id (5 for 26 tables, 2 for 3, 3 for 4).
    progress : bool
        Show a tqdm progress bar that advances once per table.

    Returns
    -------
    Trace
        Tables ``uint8`` (``uint16`` if table ids exceed 255), rows ``uint32`` (``uint64``
        if a table exceeds ``2**32`` rows).

    Raises
    ------
    TraceError
        For an unknown workload or an out-of-range parameter (the message names it), or if
        ``table_bits`` leaves no invalid table id for bad keys.
    """
    wl = workload if isinstance(workload, Workload) else WORKLOADS.get(workload)
    if wl is None:
        raise _bad("workload", workload, f"unknown workload (choose from {', '.join(WORKLOADS)})")
    if isinstance(zipf, bool) or not isinstance(zipf, numbers.Real) or not 0 < zipf < math.inf:
        raise _bad("zipf", zipf, "the Zipf exponent must be a finite number > 0")
    if isinstance(bad_key_rate, bool) or not isinstance(bad_key_rate, numbers.Real) \
            or not 0 <= bad_key_rate < 1:
        raise _bad("bad_key_rate", bad_key_rate, "must be in [0, 1)")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise _bad("seed", seed, "must be a non-negative integer")
    batch_size = wl.batch_size if batch_size is None else _positive_int("batch_size", batch_size)
    if batches is not None and lookups is not None:
        raise TraceError("generate: give batches= or lookups=, not both")
    if lookups is not None:
        per_batch = batch_size * wl.lookups_per_sample
        batches = -(-_positive_int("lookups", lookups) // per_batch)
    batches = 1 if batches is None else _positive_int("batches", batches)
    if table_bits is None:
        table_bits = wl.num_tables.bit_length()
    elif isinstance(table_bits, bool) or not isinstance(table_bits, numbers.Integral) \
            or not 1 <= table_bits <= 16:
        raise _bad("table_bits", table_bits, "must be an integer in 1..16")
    if bad_key_rate and (1 << table_bits) <= wl.num_tables:
        raise _bad("table_bits", table_bits,
                   f"leaves no invalid table id for bad keys ({wl.num_tables} tables)")

    n_samples = batches * batch_size
    per_sample = wl.lookups_per_sample
    max_table = (1 << table_bits) - 1 if bad_key_rate else wl.num_tables - 1
    table_dtype = np.uint8 if max_table < 256 else np.uint16
    row_dtype = np.uint32 if max(wl.cardinalities) <= 2**32 else np.uint64

    tables = np.tile(np.repeat(np.arange(wl.num_tables, dtype=table_dtype), wl.lookups_per_table),
                     n_samples)
    rows = np.empty(n_samples * per_sample, dtype=row_dtype)
    grid = rows.reshape(n_samples, per_sample)
    first = 0
    for t, (n, k) in enumerate(tqdm(list(zip(wl.cardinalities, wl.lookups_per_table)),
                                    desc=f"synth {wl.name}", unit="table", disable=not progress)):
        drawn = _table_rows(seed, t, n, n_samples * k, zipf if n > wl.uniform_below else None,
                            row_dtype)
        grid[:, first:first + k] = drawn.reshape(n_samples, k)
        first += k

    if bad_key_rate:
        row_bits = max(1, (max(wl.cardinalities) - 1).bit_length())
        where = np.flatnonzero(_stream(seed, 1, 0).random(len(rows)) < bad_key_rate)
        tables[where] = _stream(seed, 1, 1).integers(wl.num_tables, 1 << table_bits,
                                                     size=len(where), dtype=table_dtype)
        rows[where] = _stream(seed, 1, 2).integers(1 << row_bits, size=len(where),
                                                   dtype=row_dtype)

    meta = {"generator": "golden.synth", "workload": wl.name, "zipf": float(zipf),
            "seed": int(seed), "batch_size": batch_size, "bad_key_rate": float(bad_key_rate),
            "table_bits": table_bits, "uniform_below": wl.uniform_below, "source": wl.source}
    return Trace(tables, rows, np.full(n_samples, per_sample, dtype=np.uint32),
                 np.full(batches, batch_size, dtype=np.uint32), wl.cardinalities, wl.name, meta)
