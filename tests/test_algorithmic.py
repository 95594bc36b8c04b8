"""The algorithmic reference: exact counts, top-N, and per-batch statistics against the
plain per-sample oracle."""
import numpy as np
from hypothesis import given, strategies as st

from golden import algorithmic as A
from golden import synth
from golden.trace import Trace
from hotline_hw.config import preset

CFG = preset("tiny")


def small_trace(samples_per_batch):
    """A trace from nested lists of (table, row) samples."""
    lookups = [lk for b in samples_per_batch for s in b for lk in s]
    return Trace(np.array([t for t, _ in lookups], dtype=np.uint8),
                 np.array([r for _, r in lookups], dtype=np.uint32),
                 [len(s) for b in samples_per_batch for s in b],
                 [len(b) for b in samples_per_batch], (10, 5, 3))


def test_exact_counts_and_top_n_with_ties():
    tr = small_trace([[[(0, 1), (1, 2)], [(0, 1), (1, 3)]], [[(0, 4), (1, 3)]]])
    prof = A.profile(tr, 2)
    # counts: (0,1)=2, (1,3)=2, (0,4)=1, (1,2)=1: top-2 are the two 2s, by (table, row)
    assert prof.keys(CFG).tolist() == [(0 << 10) | 1, (1 << 10) | 3]
    prof = A.profile(tr, 3)
    assert prof.keys(CFG).tolist()[2] == (0 << 10) | 4      # tie at 1: lower dense index
    assert A.profile(tr, 10, threshold=2).order.size == 2


def test_learn_batches_and_period():
    tr = small_trace([[[(0, 1)]], [[(0, 2)]], [[(0, 3)]], [[(0, 4)]]])
    assert A.profile(tr, 9, learn_batches=2).count_of([1, 2, 3]).tolist() == [1, 1, 0]
    assert A.profile(tr, 9, learn_period=2).count_of([1, 2, 3, 4]).tolist() == [1, 0, 1, 0]


def test_bad_keys_are_not_counted_and_never_hit():
    tr = small_trace([[[(0, 1), (3, 1)], [(0, 1)]]])
    prof = A.profile(tr, 5)
    assert prof.row_counts.sum() == 2
    st_ = A.batch_stats(tr, prof.popular)
    assert st_["bad_lookups"].tolist() == [1] and st_["popular_samples"].tolist() == [1]


@given(st.lists(st.lists(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2)), max_size=5),
                         max_size=6), min_size=1, max_size=5),
       st.integers(0, 8))
def test_batch_stats_match_the_per_sample_oracle(batches, capacity):
    tr = small_trace(batches)
    prof = A.profile(tr, capacity)
    got = A.batch_stats(tr, prof.popular)
    pop_keys = set(prof.keys(CFG).tolist())
    for b, samples in enumerate(batches):
        keys = [[(t << 10) | r for t, r in s] for s in samples]
        pop, non, staging, gather = A.fragment_samples(keys, pop_keys)
        assert got["popular_samples"][b] == len(pop)
        # bad keys (table 3 of 3 tables) take the CPU path: they are never gathered
        assert got["unique_misses"][b] == len([k for k in gather if k >> 10 < 3])
        assert got["hit_lookups"][b] == sum(k in pop_keys for s in keys for k in s)
        assert got["popular_lookups"][b] == sum(len(keys[i]) for i in pop)


def test_fragment_samples_first_occurrence_indices():
    pop, non, staging, gather = A.fragment_samples([[1, 2], [3, 1], [2, 2]], {2})
    assert (pop, non) == ([2], [0, 1])
    assert staging == [[0, None], [1, 0], [None, None]] and gather == [1, 3]


def test_vectorised_on_a_synthetic_trace():
    tr = synth.generate("kaggle", batches=3, seed=1)
    prof = A.profile(tr, 10_000)
    st_ = A.batch_stats(tr, prof.popular)
    assert st_["lookups"].sum() == tr.n_lookups
    assert (st_["hit_lookups"] >= st_["popular_lookups"]).all()
    assert 0 < st_["hit_lookups"].sum() < tr.n_lookups
