"""Bit-accurate model of the access-frequency counter array.

``counter_sets x counter_ways`` entries, each ``(valid, key, count)``. A key's set is
``h3(key, SEED_COUNTER)`` over ``log2(counter_sets)`` bits. One lookup does:

* **hit** (the key is in a way of its set): ``count = min(count + 1, counter_max)``;
* **miss, the set has an invalid way**: the lowest invalid way gets ``(key, 1)``;
* **miss, the set is full**: the way with the smallest count (the lowest way on ties) is
  given to the key with ``count = min(smallest + 1, counter_max)`` (Space-Saving, Metwally
  et al. 2005, per set: the error of any tracked count is at most the replaced count, and
  any key whose frequency in its set exceeds (lookups to the set) / ways is tracked, as long
  as nothing saturates and aging is off).

Ways fill from way 0 upwards and are only ever invalidated by :meth:`CounterArray.clear`, so
the invalid ways of a set are always its top ways. **Aging** halves every count (entries stay
valid, a count of 0 is simply the first to be replaced). Lookups to different sets commute,
so the hardware may process banks in any interleaving; within a set it keeps stream order.

The **install order** (:meth:`CounterArray.install_candidates`) is: every valid entry with
``count >= threshold``, by count descending, ties by position ``set * ways + way`` ascending
(a stable counting sort by count, which the install engine implements in hardware).
"""

import numpy as np

from hotline_hw.hashing import SEED_COUNTER, h3_np

__all__ = ["CounterArray"]


class CounterArray:
    """The counter array of one configuration. State is exposed as NumPy arrays by
    :meth:`state` for comparison with the hardware's read-back."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.sets = cfg.counter_sets
        self.ways = cfg.counter_ways
        self.max = cfg.counter_max
        self.clear()

    def clear(self):
        n = self.sets * self.ways
        self._tags = [0] * n        # key per entry (meaningful when valid)
        self._counts = [0] * n
        self._fill = [0] * self.sets  # valid ways per set (always the lowest ones)
        self._where = {}            # key -> entry position, for valid entries

    def set_of(self, keys):
        """Set index of each key (array)."""
        return h3_np(keys, SEED_COUNTER, self.cfg.key_bits, self.cfg.counter_set_bits)

    def update(self, keys, sets=None):
        """Apply the lookups ``keys`` (valid keys only, in stream order)."""
        keys = np.asarray(keys, dtype=np.uint64)
        if sets is None:
            sets = self.set_of(keys)
        tags, counts, fill, where = self._tags, self._counts, self._fill, self._where
        ways, cmax = self.ways, self.max
        get = where.get
        for k, s in zip(keys.tolist(), sets.tolist()):
            pos = get(k)
            if pos is not None:                      # hit
                if counts[pos] < cmax:
                    counts[pos] += 1
            elif fill[s] < ways:                     # miss, an invalid way is free
                pos = s * ways + fill[s]
                fill[s] += 1
                tags[pos] = k
                counts[pos] = 1
                where[k] = pos
            else:                                    # miss, replace the smallest count
                base = s * ways
                seg = counts[base:base + ways]
                m = min(seg)
                pos = base + seg.index(m)
                del where[tags[pos]]
                tags[pos] = k
                counts[pos] = m + 1 if m < cmax else cmax
                where[k] = pos

    def age(self):
        """Halve every count (entries stay valid)."""
        self._counts = [c >> 1 for c in self._counts]

    def state(self):
        """``(valid, keys, counts)`` as ``(sets, ways)`` arrays."""
        shape = (self.sets, self.ways)
        valid = np.arange(self.ways)[None, :] < np.asarray(self._fill)[:, None]
        keys = np.asarray(self._tags, dtype=np.uint64).reshape(shape)
        counts = np.asarray(self._counts, dtype=np.int64).reshape(shape)
        return valid, np.where(valid, keys, 0).astype(np.uint64), np.where(valid, counts, 0)

    def count_of(self, key):
        """The count tracked for ``key`` (0 if untracked)."""
        pos = self._where.get(int(key))
        return 0 if pos is None else self._counts[pos]

    def tracked(self):
        """``{key: count}`` of every valid entry."""
        return {k: self._counts[p] for k, p in self._where.items()}

    def install_candidates(self, threshold):
        """Keys and counts of the entries eligible for install, in install order."""
        valid, keys, counts = self.state()
        valid, keys, counts = valid.ravel(), keys.ravel(), counts.ravel()
        pos = np.flatnonzero(valid & (counts >= threshold))
        order = pos[np.argsort(-counts[pos], kind="stable")]
        return keys[order], counts[order]
