"""Hash functions shared by the gateware and the golden model.

All hashing in the accelerator is **H3** (Carter & Wegman's class of universal hashes over
GF(2)): output bit ``i`` is the parity of ``key & mask[i]``. In hardware that is one XOR tree
per output bit with no carry chain and no multiplier, so it pipelines freely and costs the
same for every lane; in NumPy it is a popcount per output bit.

Each structure that hashes keys has its own seed, so their set indices are independent:

========================  =====  ===============================================
structure                 seed   used for
========================  =====  ===============================================
access counter array      1      set index (``counter_sets`` sets)
popularity CAM (``hash``) 2      set index (``cam_entries // cam_ways`` sets)
staging de-dup table      3      set index (``dedup_sets`` sets)
========================  =====  ===============================================

The masks are drawn from SplitMix64 (Steele et al., 2014) with a fixed seed, so they are
part of the design: changing them changes which rows collide, and the golden model and the
gateware read them from here.
"""

from functools import lru_cache

import numpy as np

__all__ = ["SEED_COUNTER", "SEED_CAM", "SEED_DEDUP", "SEED_DMA_FILTER", "h3_masks", "h3", "h3_np"]

SEED_COUNTER = 1
SEED_CAM = 2
SEED_DEDUP = 3
SEED_DMA_FILTER = 4      # the DMA's per-bank filter of pending keys

_M64 = (1 << 64) - 1


def _splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & _M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return state, z ^ (z >> 31)


@lru_cache(maxsize=None)
def h3_masks(seed, key_bits, out_bits):
    """The H3 masks: a tuple of ``out_bits`` integers of ``key_bits`` bits.

    Mask ``i`` selects the key bits whose parity is output bit ``i``. A mask is never zero
    (a zero mask would make an output bit constant).
    """
    if key_bits < 1 or out_bits < 0:
        raise ValueError(f"h3_masks: key_bits={key_bits} out_bits={out_bits}")
    state = (0x486F746C696E65 << 8) | seed  # "Hotline" | seed
    masks = []
    key_mask = (1 << key_bits) - 1
    while len(masks) < out_bits:
        state, z = _splitmix64(state)
        m = z & key_mask
        if m:
            masks.append(m)
    return tuple(masks)


def h3(key, seed, key_bits, out_bits):
    """H3 hash of one integer key to ``out_bits`` bits (reference, one key at a time)."""
    h = 0
    for i, m in enumerate(h3_masks(seed, key_bits, out_bits)):
        h |= (bin(key & m).count("1") & 1) << i
    return h


@lru_cache(maxsize=None)
def _byte_tables(seed, key_bits, out_bits):
    """H3 is linear over GF(2): the hash of a key is the XOR of the hashes of its bytes.
    Table ``j`` maps a byte value ``v`` to the hash of ``v << 8j``."""
    masks = h3_masks(seed, key_bits, out_bits)
    v = np.arange(256, dtype=np.uint64)
    tables = []
    for j in range((key_bits + 7) // 8):
        t = np.zeros(256, dtype=np.int64)
        for i, m in enumerate(masks):
            t |= ((np.bitwise_count(v & np.uint64((m >> (8 * j)) & 0xFF)) & 1).astype(np.int64)) << i
        tables.append(t)
    return tables


def h3_np(keys, seed, key_bits, out_bits):
    """H3 hash of an array of keys (any unsigned integer dtype); returns ``int64``.

    Bits of a key above ``key_bits`` are ignored, as in the gateware."""
    keys = np.asarray(keys, dtype=np.uint64)
    out = np.zeros(keys.shape, dtype=np.int64)
    if out_bits == 0:
        return out
    for j, t in enumerate(_byte_tables(seed, key_bits, out_bits)):
        out ^= t[((keys >> np.uint64(8 * j)) & np.uint64(0xFF)).astype(np.intp)]
    return out
