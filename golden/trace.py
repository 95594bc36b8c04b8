"""A trace of embedding lookups: mini-batches of samples of (table, row) lookups.

A :class:`Trace` is held column-wise in NumPy arrays (compressed-sparse-row style):

* ``tables[i]``, ``rows[i]``: the i-th lookup of the whole trace, in stream order;
* ``sample_lengths[s]``: lookups of sample ``s`` (26 for one-hot Criteo, 214 for DLRMv2);
* ``batch_sizes[b]``: samples of mini-batch ``b``.

Keys are formed only against a configuration, ``key = (table << row_bits) | row``
(:meth:`Trace.keys`), so one trace serves every variant whose key format can hold it.
"""

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Trace", "TraceError"]


class TraceError(ValueError):
    """A trace is malformed, truncated, or does not fit a configuration."""


@dataclass
class Trace:
    """Lookups grouped into samples and mini-batches.

    Parameters
    ----------
    tables : ndarray of uint8/uint16
        Table id of every lookup.
    rows : ndarray of uint32/uint64
        Row index of every lookup.
    sample_lengths : ndarray of uint32
        Lookups per sample; sums to ``len(tables)``.
    batch_sizes : ndarray of uint32
        Samples per mini-batch; sums to ``len(sample_lengths)``.
    cardinalities : tuple of int
        Rows of each table of the workload (table ids ``>= len(cardinalities)`` are bad keys).
    name : str
        Workload name (``kaggle``, ``terabyte``, ...).
    meta : dict
        How the trace was made (generator, seed, Zipf exponent, source file, ...).
    """

    tables: np.ndarray
    rows: np.ndarray
    sample_lengths: np.ndarray
    batch_sizes: np.ndarray
    cardinalities: tuple
    name: str = "trace"
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        self.tables = np.asarray(self.tables)
        self.rows = np.asarray(self.rows)
        self.sample_lengths = np.asarray(self.sample_lengths, dtype=np.uint32)
        self.batch_sizes = np.asarray(self.batch_sizes, dtype=np.uint32)
        self.cardinalities = tuple(int(c) for c in self.cardinalities)
        if self.tables.shape != self.rows.shape or self.tables.ndim != 1:
            raise TraceError("trace: tables and rows must be 1-D arrays of the same length")
        if int(self.sample_lengths.sum(dtype=np.uint64)) != len(self.tables):
            raise TraceError(f"trace: sample lengths sum to {int(self.sample_lengths.sum(dtype=np.uint64))}"
                             f" but there are {len(self.tables)} lookups")
        if int(self.batch_sizes.sum(dtype=np.uint64)) != len(self.sample_lengths):
            raise TraceError(f"trace: mini-batch sizes sum to {int(self.batch_sizes.sum(dtype=np.uint64))}"
                             f" but there are {len(self.sample_lengths)} samples")

    # --- sizes --------------------------------------------------------------------------
    @property
    def n_lookups(self):
        return len(self.tables)

    @property
    def n_samples(self):
        return len(self.sample_lengths)

    @property
    def n_batches(self):
        return len(self.batch_sizes)

    @property
    def num_tables(self):
        return len(self.cardinalities)

    @property
    def row_bits_needed(self):
        """Row bits the largest row index of the trace needs."""
        return max(1, int(self.rows.max()).bit_length()) if self.n_lookups else 1

    @property
    def table_bits_needed(self):
        return max(1, int(self.tables.max()).bit_length()) if self.n_lookups else 1

    # --- offsets ------------------------------------------------------------------------
    @property
    def sample_offsets(self):
        """``n_samples + 1`` lookup offsets: sample ``s`` is ``[off[s], off[s+1])``."""
        off = np.zeros(self.n_samples + 1, dtype=np.int64)
        np.cumsum(self.sample_lengths, out=off[1:])
        return off

    @property
    def batch_sample_offsets(self):
        """``n_batches + 1`` sample offsets of the mini-batches."""
        off = np.zeros(self.n_batches + 1, dtype=np.int64)
        np.cumsum(self.batch_sizes, out=off[1:])
        return off

    @property
    def batch_lookup_offsets(self):
        """``n_batches + 1`` lookup offsets of the mini-batches."""
        return self.sample_offsets[self.batch_sample_offsets]

    # --- keys -----------------------------------------------------------------------------
    def check_fits(self, cfg):
        """Raise :class:`TraceError` unless every lookup can be written as a key of ``cfg``."""
        if self.row_bits_needed > cfg.row_bits:
            raise TraceError(f"trace {self.name!r}: rows need {self.row_bits_needed} bits but "
                             f"the configuration has row_bits={cfg.row_bits}")
        if self.table_bits_needed > cfg.table_bits:
            raise TraceError(f"trace {self.name!r}: table ids need {self.table_bits_needed} bits "
                             f"but the configuration has table_bits={cfg.table_bits}")

    def keys(self, cfg):
        """Keys ``(table << row_bits) | row`` of every lookup as ``uint64``."""
        self.check_fits(cfg)
        return (self.tables.astype(np.uint64) << np.uint64(cfg.row_bits)) | self.rows.astype(np.uint64)

    def dense_index(self):
        """Each lookup as an index into the concatenation of all tables (``int64``); bad
        table ids (``>= num_tables``) and rows past a table's cardinality give ``-1``."""
        card = np.asarray(self.cardinalities + (0,), dtype=np.int64)
        base = np.zeros(len(card), dtype=np.int64)
        np.cumsum(card[:-1], out=base[1:])
        t = np.minimum(self.tables.astype(np.int64), len(card) - 1)
        r = self.rows.astype(np.int64)
        ok = r < card[t]
        return np.where(ok, base[t] + r, -1)

    # --- slicing ------------------------------------------------------------------------
    def batches(self, start, stop=None):
        """A new trace of mini-batches ``[start, stop)``."""
        stop = self.n_batches if stop is None else min(stop, self.n_batches)
        soff = self.batch_sample_offsets
        loff = self.sample_offsets
        s0, s1 = soff[start], soff[stop]
        l0, l1 = loff[s0], loff[s1]
        return Trace(self.tables[l0:l1], self.rows[l0:l1], self.sample_lengths[s0:s1],
                     self.batch_sizes[start:stop], self.cardinalities, self.name, dict(self.meta))

    def samples_of_batch(self, b, cfg=None):
        """Mini-batch ``b`` as a list of samples, each a list of (table, row) or, given a
        configuration, a list of keys. For tests and small cases."""
        sub = self.batches(b, b + 1)
        off = sub.sample_offsets
        vals = sub.keys(cfg) if cfg is not None else list(zip(sub.tables.tolist(), sub.rows.tolist()))
        vals = vals.tolist() if cfg is not None else vals
        return [vals[off[s]:off[s + 1]] for s in range(sub.n_samples)]

    def describe(self):
        return (f"{self.name}: {self.n_batches} mini-batches, {self.n_samples} samples, "
                f"{self.n_lookups} lookups, {self.num_tables} tables")
