"""Bit-accurate model of the mini-batch fragmenter (one mini-batch at a time).

For every lookup, in stream order (sample by sample, lane by lane):

1. A **bad key** (table id >= ``num_tables``) leaves as ``OVERFLOW(key)``.
2. A lookup at position ``>= max_sample_lookups`` of its sample (a **long sample**) leaves as
   ``OVERFLOW(key)``; the sample is flagged and counted.
3. Otherwise the key is looked up in the CAM: a hit leaves as ``POPULAR(slot)``.
4. A miss is de-duplicated within the mini-batch. The first occurrence of a missing key
   tries to claim a staging index: it is refused if the bank already holds ``staging_rows``
   rows (*staging full*), or else if its de-dup set (``h3(key, SEED_DEDUP)``) already holds
   ``dedup_ways`` keys (*de-dup full*); otherwise it gets the next index (0, 1, 2, ...) and a
   gather request ``(key, bank, index)`` is emitted. Later occurrences of a staged key reuse
   its index; those of a refused key are refused again (the bank and the set only fill up).
   A staged miss leaves as ``STAGED(index)``, a refused one as ``OVERFLOW(key)``.

A sample is **popular** iff every one of its lookups left as ``POPULAR`` (a sample with no
lookups is popular). Each sample leaves whole on the popular or the non-popular output,
keeping input order within each output, with its sample id (its position in the mini-batch
modulo ``2**sample_id_bits``; a mini-batch with more samples is flagged).
"""

from dataclasses import dataclass

import numpy as np

from hotline_hw.hashing import SEED_DEDUP, h3_np

from .records import TAG_OVERFLOW, TAG_POPULAR, TAG_STAGED, BatchCounters, MicroBatch

__all__ = ["FragmentResult", "fragment", "dedup_assign"]


@dataclass
class FragmentResult:
    """One mini-batch through the fragmenter.

    Members
    -------
    bank: staging bank of the mini-batch.
    popular, nonpopular: the two output micro-batches.
    gather_keys, gather_indices: the gather requests in emission order (index order).
    tags, values: the translated lookup of every input lookup, in input order.
    sample_popular: verdict of every input sample.
    counters: statistics of the mini-batch.
    unique_misses: distinct missing rows (staged or refused).
    """
    bank: int
    popular: MicroBatch
    nonpopular: MicroBatch
    gather_keys: np.ndarray
    gather_indices: np.ndarray
    tags: np.ndarray
    values: np.ndarray
    sample_popular: np.ndarray
    counters: BatchCounters
    unique_misses: int = 0


def dedup_assign(cfg, miss_keys):
    """Staging indices of the misses of one mini-batch (keys in stream order).

    Returns ``(index, uniq_keys, uniq_index, n_staging_full, n_dedup_full)``: ``index[i]``
    is the staging index of ``miss_keys[i]`` or -1 if refused; ``uniq_keys`` are the unique
    keys in order of first occurrence and ``uniq_index`` their indices (-1 if refused).
    ``n_dedup_full`` counts the misses (every occurrence) whose key did not fit its de-dup
    set; ``n_staging_full`` the misses whose key fitted its set but came after the bank held
    ``staging_rows`` rows. A key that fits its set takes a way even when the bank is full.
    """
    miss_keys = np.asarray(miss_keys, dtype=np.uint64)
    if len(miss_keys) == 0:
        e = np.zeros(0, dtype=np.int64)
        return e, np.zeros(0, dtype=np.uint64), e, 0, 0
    uk, first, inv = np.unique(miss_keys, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")        # unique keys by first occurrence
    uk_o = uk[order]
    dset = h3_np(uk_o, SEED_DEDUP, cfg.key_bits, cfg.dedup_set_bits)
    # rank of each unique key among the earlier unique keys of its de-dup set
    by_set = np.lexsort((np.arange(len(uk_o)), dset))
    ds_sorted = dset[by_set]
    starts = np.r_[0, np.flatnonzero(ds_sorted[1:] != ds_sorted[:-1]) + 1]
    run_start = np.repeat(starts, np.diff(np.r_[starts, len(ds_sorted)]))
    rank = np.empty(len(uk_o), dtype=np.int64)
    rank[by_set] = np.arange(len(uk_o)) - run_start
    fits_set = rank < cfg.dedup_ways
    idx = np.cumsum(fits_set) - 1                   # index each would get
    staged = fits_set & (idx < cfg.staging_rows)
    uniq_index = np.where(staged, idx, -1)
    inv_order = np.empty_like(order)
    inv_order[order] = np.arange(len(order))
    of_lookup = inv_order[inv.ravel()]             # unique-key number of every miss
    index = uniq_index[of_lookup]
    # per lookup, as the hardware counts them: a miss whose key did not fit its de-dup set
    # (every occurrence), and a miss whose key fitted but found the bank full
    dedup_full = int((~fits_set[of_lookup]).sum())
    staging_full = int((fits_set & ~staged)[of_lookup].sum())
    return index, uk_o, uniq_index, staging_full, dedup_full


def fragment(cfg, cam, keys, lengths, bank):
    """Fragment one mini-batch.

    Parameters
    ----------
    cfg : HotlineConfig
    cam : golden.cam.Cam
        The CAM as it is during the mini-batch.
    keys : array of uint64
        The mini-batch's keys in stream order.
    lengths : array of int
        Lookups per sample.
    bank : int
        Staging bank of this mini-batch.
    """
    keys = np.asarray(keys, dtype=np.uint64)
    lengths = np.asarray(lengths, dtype=np.int64)
    n, ns = len(keys), len(lengths)
    off = np.zeros(ns + 1, dtype=np.int64)
    np.cumsum(lengths, out=off[1:])
    sample_of = np.repeat(np.arange(ns), lengths)
    pos_in_sample = np.arange(n) - off[sample_of]

    bad = (keys >> np.uint64(cfg.row_bits)) >= np.uint64(cfg.num_tables)
    excess = pos_in_sample >= cfg.max_sample_lookups
    normal = ~bad & ~excess
    hit = np.zeros(n, dtype=bool)
    slot = np.zeros(n, dtype=np.int64)
    hit[normal], slot[normal] = cam.lookup(keys[normal])
    miss = normal & ~hit
    miss_idx, uniq_keys, uniq_index, n_staging_full, n_dedup_full = dedup_assign(cfg, keys[miss])

    tags = np.full(n, TAG_OVERFLOW, dtype=np.uint8)
    values = keys.copy()
    tags[hit] = TAG_POPULAR
    values[hit] = slot[hit].astype(np.uint64)
    staged_lookup = np.zeros(n, dtype=bool)
    staged_lookup[miss] = miss_idx >= 0
    tags[staged_lookup] = TAG_STAGED
    values[staged_lookup] = miss_idx[miss_idx >= 0].astype(np.uint64)

    not_pop = np.bincount(sample_of[tags != TAG_POPULAR], minlength=ns)
    sample_popular = not_pop == 0
    sample_ids = np.arange(ns, dtype=np.int64) & ((1 << cfg.sample_id_bits) - 1)

    def micro(sel):
        lk = np.repeat(sel, lengths)
        return MicroBatch(sample_ids[sel], lengths[sel], tags[lk], values[lk])

    g = uniq_index >= 0
    counters = BatchCounters(
        lookups=n, hits=int(hit.sum()),
        popular_samples=int(sample_popular.sum()), nonpopular_samples=int((~sample_popular).sum()),
        staged_rows=int(g.sum()), overflows=int((tags == TAG_OVERFLOW).sum()),
        bad_keys=int(bad.sum()), long_samples=int((lengths > cfg.max_sample_lookups).sum()),
        staging_full=n_staging_full, dedup_full=n_dedup_full,
        id_wraps=int(ns > (1 << cfg.sample_id_bits)), minibatches=1)
    return FragmentResult(bank, micro(sample_popular), micro(~sample_popular),
                          uniq_keys[g], uniq_index[g], tags, values, sample_popular, counters,
                          len(uniq_keys))
