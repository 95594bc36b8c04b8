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
    counts: accesses per dense row index (rows of all tables concatenated).
    order: dense indices of the popular rows, most accessed first.
    popular: boolean mask over dense indices.
    table_offsets: dense index of row 0 of each table.
    """
    counts: np.ndarray
    order: np.ndarray
    popular: np.ndarray
    table_offsets: np.ndarray

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
    counts = np.bincount(sel[sel >= 0], minlength=n_rows)
    eligible = np.count_nonzero(counts >= threshold)
    k = min(capacity, eligible)
    if k == 0:
        order = np.zeros(0, dtype=np.int64)
    else:
        # the k-th largest count, then everything above it plus the lowest-indexed ties
        part = np.argpartition(-counts, k - 1)[:k]
        kth = counts[part].min()
        above = np.flatnonzero(counts > kth)
        ties = np.flatnonzero(counts == kth)[:k - len(above)]
        order = np.concatenate([above, ties])
        order = order[np.lexsort((order, -counts[order]))]
    popular = np.zeros(n_rows, dtype=bool)
    popular[order] = True
    return ExactProfile(counts, order, popular, _table_offsets(trace.cardinalities))


def batch_stats(trace, popular, dense=None):
    """Per mini-batch statistics of fragmenting ``trace`` against a popular mask over dense
    indices (exact de-duplication, unlimited staging).

    Returns a dict of arrays (one entry per mini-batch): ``samples``, ``popular_samples``,
    ``lookups``, ``hit_lookups``, ``popular_lookups`` (lookups of popular samples),
    ``unique_misses`` (rows to gather), ``bad_lookups``.
    """
    if dense is None:
        dense = trace.dense_index()
    good = dense >= 0
    hit = np.zeros(len(dense), dtype=bool)
    hit[good] = popular[dense[good]]
    soff = trace.sample_offsets
    boff = trace.batch_sample_offsets
    nb = trace.n_batches
    lens = trace.sample_lengths.astype(np.int64)
    # misses per sample: popular iff zero (empty samples are popular)
    miss = (~hit).astype(np.int64)
    cm = np.zeros(len(miss) + 1, dtype=np.int64)
    np.cumsum(miss, out=cm[1:])
    sample_pop = (cm[soff[1:]] - cm[soff[:-1]]) == 0
    batch_of_sample = np.repeat(np.arange(nb), trace.batch_sizes.astype(np.int64))
    popular_samples = np.bincount(batch_of_sample[sample_pop], minlength=nb)
    popular_lookups = np.bincount(batch_of_sample, weights=np.where(sample_pop, lens, 0), minlength=nb)
    loff = soff[boff]
    ch = np.zeros(len(hit) + 1, dtype=np.int64)
    np.cumsum(hit, out=ch[1:])
    hit_lookups = ch[loff[1:]] - ch[loff[:-1]]
    cg = np.zeros(len(good) + 1, dtype=np.int64)
    np.cumsum(~good, out=cg[1:])
    bad = cg[loff[1:]] - cg[loff[:-1]]
    # unique misses per batch: sort (batch, dense) pairs of the good misses
    m = np.flatnonzero(good & ~hit)
    batch_of_lookup = np.searchsorted(loff, m, side="right") - 1
    comp = batch_of_lookup.astype(np.int64) * (int(sum(trace.cardinalities)) + 1) + dense[m]
    comp.sort()
    first = np.ones(len(comp), dtype=bool)
    first[1:] = comp[1:] != comp[:-1]
    uniq_batches = comp[first] // (int(sum(trace.cardinalities)) + 1)
    unique_misses = np.bincount(uniq_batches, minlength=nb)
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
