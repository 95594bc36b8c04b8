"""The algorithmic reference: FAE/Hotline as published, with exact counts.

* **Profile**: count every access of every (table, row) over the sampled mini-batches
  (every ``learn_period``-th of the learning phase), exactly.
* **Popular set**: the ``capacity`` rows with the highest counts among those with
  ``count >= threshold``, all tables sorted together (FAE: N = GPU budget / row size); ties
  by (table, row) ascending.
* **Classification**: a sample is popular iff all its lookups hit the popular set.
* **Fragmentation**: the popular samples form the popular micro-batch and the others the
  non-popular one, both in input order.
* **Staging**: within a mini-batch, each missing row gets a staging index by first
  occurrence (0, 1, 2, ...; no capacity limit here); the gather list is the unique missing
  rows in index order, and the scatter list is the same rows back.

Everything is vectorised over the whole trace, so it runs at tens of millions of lookups per
second; :func:`fragment_samples` is the plain per-sample version used as an oracle in tests.
"""

from dataclasses import dataclass

import numpy as np

__all__ = ["ExactProfile", "profile", "batch_stats", "fragment_samples", "dense_of_keys"]


@dataclass
class ExactProfile:
    """Exact access counts and the popular set.

    Members
    -------
    rows: dense indices (rows of all tables concatenated) accessed in the profile, ascending.
    row_counts: accesses of each of ``rows``.
    order: dense indices of the popular rows, most accessed first.
    popular: boolean mask over all dense indices.
    table_offsets: dense index of row 0 of each table.
    """
    rows: np.ndarray
    row_counts: np.ndarray
    order: np.ndarray
    popular: np.ndarray
    table_offsets: np.ndarray

    def count_of(self, dense):
        """Accesses of the dense indices ``dense`` (0 for rows never accessed)."""
        dense = np.asarray(dense)
        i = np.minimum(np.searchsorted(self.rows, dense), max(len(self.rows) - 1, 0))
        found = (self.rows[i] == dense) if len(self.rows) else np.zeros(dense.shape, dtype=bool)
        return np.where(found, self.row_counts[i] if len(self.rows) else 0, 0)

    def keys(self, cfg):
        """The popular rows as keys of ``cfg``, most accessed first."""
        t = np.searchsorted(self.table_offsets, self.order, side="right") - 1
        r = self.order - self.table_offsets[t]
        return (t.astype(np.uint64) << np.uint64(cfg.row_bits)) | r.astype(np.uint64)


def _table_offsets(cardinalities):
    off = np.zeros(len(cardinalities) + 1, dtype=np.int64)
    np.cumsum(np.asarray(cardinalities, dtype=np.int64), out=off[1:])
    return off


def dense_of_keys(keys, cfg, cardinalities):
    """Dense indices of keys of ``cfg`` (-1 for bad keys and rows past a table's end)."""
    keys = np.asarray(keys, dtype=np.uint64)
    off = _table_offsets(cardinalities)
    t = (keys >> np.uint64(cfg.row_bits)).astype(np.int64)
    r = (keys & np.uint64((1 << cfg.row_bits) - 1)).astype(np.int64)
    ok = t < len(cardinalities)
    tc = np.minimum(t, len(cardinalities) - 1)
    ok &= r < np.diff(off)[tc]
    return np.where(ok, off[tc] + r, -1)


def profile(trace, capacity, *, learn_batches=None, learn_period=1, threshold=1, dense=None):
    """Exact profile of mini-batches ``0, P, 2P, ...`` among the first ``learn_batches``
    (all by default), and the top-``capacity`` popular set."""
    if dense is None:
        dense = trace.dense_index()
    n_rows = int(sum(trace.cardinalities))
    nb = trace.n_batches if learn_batches is None else min(learn_batches, trace.n_batches)
    loff = trace.batch_lookup_offsets
    if learn_period == 1:
        sel = dense[:loff[nb]]
    else:
        sel = np.concatenate([dense[loff[b]:loff[b + 1]] for b in range(0, nb, learn_period)]
                             or [np.zeros(0, dtype=np.int64)])
    # count by sorting (much cheaper than a bincount over every row of every table)
    sel = np.sort(sel[sel >= 0].astype(np.uint32 if n_rows < 1 << 32 else np.int64))
    if len(sel):
        starts = np.flatnonzero(np.r_[True, sel[1:] != sel[:-1]])
        rows = sel[starts].astype(np.int64)
        counts = np.diff(np.r_[starts, len(sel)])
    else:
        rows = counts = np.zeros(0, dtype=np.int64)
    eligible = np.flatnonzero(counts >= threshold)
    k = min(capacity, len(eligible))
    if k == 0:
        top = np.zeros(0, dtype=np.int64)
    else:
        # the k-th largest count, then everything above it plus the lowest-indexed ties
        ce = counts[eligible]
        kth = ce[np.argpartition(-ce, k - 1)[k - 1]]
        above = eligible[ce > kth]
        ties = eligible[ce == kth][:k - len(above)]
        top = np.concatenate([above, ties])
        top = top[np.lexsort((rows[top], -counts[top]))]
    order = rows[top]
    popular = np.zeros(n_rows, dtype=bool)
    popular[order] = True
    return ExactProfile(rows, counts, order, popular, _table_offsets(trace.cardinalities))


def batch_stats(trace, popular, dense=None):
    """Per mini-batch statistics of fragmenting ``trace`` against a popular mask over dense
    indices (exact de-duplication, unlimited staging).

    Returns a dict of arrays (one entry per mini-batch): ``samples``, ``popular_samples``,
    ``lookups``, ``hit_lookups``, ``popular_lookups`` (lookups of popular samples),
    ``unique_misses`` (rows to gather), ``bad_lookups``.
    """
    if dense is None:
        dense = trace.dense_index()
    n_rows = len(popular)
    hit = np.append(popular, False)[dense]           # dense -1 (bad) reads the extra False
    soff = trace.sample_offsets
    loff = soff[trace.batch_sample_offsets]
    nb = trace.n_batches
    lens = trace.sample_lengths.astype(np.int64)
    cm = np.zeros(len(hit) + 1, dtype=np.int64)     # misses (bad keys included) so far
    np.cumsum(~hit, out=cm[1:])
    sample_pop = (cm[soff[1:]] - cm[soff[:-1]]) == 0  # no miss: popular (empty samples too)
    batch_of_sample = np.repeat(np.arange(nb), trace.batch_sizes.astype(np.int64))
    popular_samples = np.bincount(batch_of_sample[sample_pop], minlength=nb)
    popular_lookups = np.bincount(batch_of_sample[sample_pop], weights=lens[sample_pop], minlength=nb)
    hit_lookups = np.diff(loff) - (cm[loff[1:]] - cm[loff[:-1]])
    bad_pos = np.flatnonzero(dense < 0)
    bad = np.bincount(np.searchsorted(loff, bad_pos, side="right") - 1, minlength=nb)
    # unique misses per batch: sort (batch, dense) pairs of the good misses
    m = np.flatnonzero(~hit)
    m = m[dense[m] >= 0]
    batch_of_lookup = np.searchsorted(loff, m, side="right") - 1
    comp = batch_of_lookup.astype(np.int64) * (n_rows + 1) + dense[m]
    comp.sort()
    first = np.ones(len(comp), dtype=bool)
    first[1:] = comp[1:] != comp[:-1]
    unique_misses = np.bincount(comp[first] // (n_rows + 1), minlength=nb)
    return {
        "samples": trace.batch_sizes.astype(np.int64),
        "popular_samples": popular_samples.astype(np.int64),
        "lookups": np.diff(loff),
        "hit_lookups": hit_lookups,
        "popular_lookups": popular_lookups.astype(np.int64),
        "unique_misses": unique_misses.astype(np.int64),
        "bad_lookups": bad,
    }


def fragment_samples(samples, popular_keys):
    """Fragment one mini-batch given as a list of samples (lists of keys) against a set of
    popular keys, the plain way.

    Returns ``(popular_ids, nonpopular_ids, staging, gather)``: the sample ids of each
    micro-batch in order, ``staging[s][j]`` = staging index of lookup ``j`` of sample ``s``
    (``None`` for hits), and the gather list (unique missing keys in index order). The
    scatter list is the gather list.
    """
    popular_keys = set(popular_keys)
    pop_ids, non_ids, staging, index = [], [], [], {}
    for sid, sample in enumerate(samples):
        row = []
        for k in sample:
            if k in popular_keys:
                row.append(None)
            else:
                row.append(index.setdefault(k, len(index)))
        staging.append(row)
        (pop_ids if all(v is None for v in row) else non_ids).append(sid)
    return pop_ids, non_ids, staging, list(index)
