import numpy as np
from hypothesis import given, strategies as st

from hotline_hw.hashing import SEED_CAM, SEED_COUNTER, h3, h3_masks, h3_np


@given(st.lists(st.integers(0, (1 << 31) - 1), max_size=50), st.integers(1, 31),
       st.integers(0, 16), st.sampled_from([1, 2, 3]))
def test_vectorised_equals_reference(keys, key_bits, out_bits, seed):
    keys = [k & ((1 << key_bits) - 1) for k in keys]
    assert h3_np(np.array(keys, dtype=np.uint64), seed, key_bits, out_bits).tolist() == \
        [h3(k, seed, key_bits, out_bits) for k in keys]


def test_hash_is_linear_and_masks_nonzero():
    masks = h3_masks(SEED_COUNTER, 29, 12)
    assert len(masks) == 12 and all(0 < m < 1 << 29 for m in masks)
    a, b = 0x1234567, 0xABCDEF
    assert h3(a ^ b, SEED_COUNTER, 29, 12) == h3(a, SEED_COUNTER, 29, 12) ^ h3(b, SEED_COUNTER, 29, 12)


def test_seeds_are_independent_and_spread():
    keys = np.arange(1 << 16, dtype=np.uint64) << np.uint64(3)   # a strided pattern
    a = h3_np(keys, SEED_COUNTER, 29, 8)
    b = h3_np(keys, SEED_CAM, 29, 8)
    assert not np.array_equal(a, b)
    counts = np.bincount(a, minlength=256)
    assert counts.min() > 0.5 * counts.mean() and counts.max() < 1.5 * counts.mean()
