"""Bit-accurate model of the popularity CAM: key -> (hit, slot).

Two kinds (``HotlineConfig.cam_kind``):

* ``full``: fully associative, ``cam_entries`` slots. Install places rows in slots 0, 1, 2,
  ... in install order. A lookup matching several slots (possible only through host writes)
  returns the lowest.
* ``hash``: set-associative, ``cam_sets = cam_entries // cam_ways`` sets chosen by
  ``h3(key, SEED_CAM)``; ``slot = set * cam_ways + way``. Install places a row in the lowest
  free way of its set; when the set is full the row is **skipped** (counted). A host write
  must name a slot in the key's own set, else it is rejected (counted). A lookup matching
  several ways returns the lowest.

Slot ``s`` of the popular region lives at ``POPULAR_BASE + s * ROW_BYTES``.
"""

from dataclasses import dataclass

import numpy as np

from hotline_hw.hashing import SEED_CAM, h3_np

__all__ = ["Cam", "InstallResult"]


@dataclass
class InstallResult:
    """What an install did: ``keys[i]`` went to ``slots[i]`` (in install order);
    ``skipped``: candidates dropped because their ``hash`` set was full; ``considered``:
    candidates examined before the CAM filled or the candidates ran out."""
    keys: np.ndarray
    slots: np.ndarray
    skipped: int
    considered: int


class Cam:
    def __init__(self, cfg):
        self.cfg = cfg
        self.entries = cfg.cam_entries
        self.ways = cfg.cam_ways
        self.sets = cfg.cam_sets
        self.clear()

    def clear(self):
        self.valid = np.zeros(self.entries, dtype=bool)
        self.keys = np.zeros(self.entries, dtype=np.uint64)

    def set_of(self, keys):
        if self.cfg.cam_kind == "full":
            return np.zeros(np.shape(keys), dtype=np.int64)
        return h3_np(keys, SEED_CAM, self.cfg.key_bits, self.cfg.cam_set_bits)

    def lookup(self, keys):
        """``(hit, slot)`` arrays for an array of keys (slot is 0 on a miss)."""
        keys = np.asarray(keys, dtype=np.uint64)
        if self.cfg.cam_kind == "full":
            slots = np.flatnonzero(self.valid)
            k = self.keys[slots]
            order = np.lexsort((slots, k))          # by key, then slot: first = lowest slot
            k, slots = k[order], slots[order]
            first = np.ones(len(k), dtype=bool)
            first[1:] = k[1:] != k[:-1]
            k, slots = k[first], slots[first]
            i = np.searchsorted(k, keys)
            i = np.minimum(i, max(len(k) - 1, 0))
            hit = (k[i] == keys) if len(k) else np.zeros(len(keys), dtype=bool)
            return hit, np.where(hit, slots[i] if len(k) else 0, 0).astype(np.int64)
        base = self.set_of(keys) * self.ways
        hit = np.zeros(len(keys), dtype=bool)
        slot = np.zeros(len(keys), dtype=np.int64)
        for w in range(self.ways - 1, -1, -1):       # the lowest matching way wins
            m = self.valid[base + w] & (self.keys[base + w] == keys)
            hit |= m
            slot[m] = base[m] + w
        return hit, slot

    def contents(self):
        """``{slot: key}`` of the valid slots."""
        return {int(s): int(self.keys[s]) for s in np.flatnonzero(self.valid)}

    def write(self, slot, key, valid=True):
        """A host write of one entry. Returns False (and changes nothing) if the slot is out
        of range or, for a ``hash`` CAM, not in the key's set."""
        if not 0 <= slot < self.entries:
            return False
        if valid and self.cfg.cam_kind == "hash" and int(self.set_of(np.array([key]))[0]) != slot // self.ways:
            return False
        self.valid[slot] = bool(valid)
        self.keys[slot] = key if valid else 0
        return True

    def install(self, cand_keys):
        """Install candidates (in install order) into an empty CAM."""
        assert not self.valid.any(), "install expects a cleared CAM"
        cand_keys = np.asarray(cand_keys, dtype=np.uint64)
        if self.cfg.cam_kind == "full":
            n = min(len(cand_keys), self.entries)
            slots = np.arange(n, dtype=np.int64)
            self.valid[:n] = True
            self.keys[:n] = cand_keys[:n]
            return InstallResult(cand_keys[:n].copy(), slots, 0, n)
        sets = self.set_of(cand_keys).tolist()
        fill = [0] * self.sets
        keys, slots, skipped, installed, considered = [], [], 0, 0, 0
        for k, s in zip(cand_keys.tolist(), sets):
            if installed == self.entries:
                break
            considered += 1
            w = fill[s]
            if w == self.ways:
                skipped += 1
                continue
            fill[s] = w + 1
            keys.append(k)
            slots.append(s * self.ways + w)
            installed += 1
        keys = np.asarray(keys, dtype=np.uint64)
        slots = np.asarray(slots, dtype=np.int64)
        self.valid[slots] = True
        self.keys[slots] = keys
        return InstallResult(keys, slots, skipped, considered)
