"""The counter array model against hand-computed cases and a plain reference."""
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, strategies as st

from golden.counters import CounterArray
from hotline_hw.config import preset


def one_set(ways, bits=8, sets=1):
    return preset("tiny", counter_sets=sets, counter_ways=ways, counter_bits=bits,
                  counter_banks=1, learn_threshold=1)


def entries(ca):
    valid, keys, counts = ca.state()
    return [[(int(k), int(c)) if v else None for v, k, c in zip(*row)]
            for row in zip(valid, keys, counts)]


def test_hit_fill_and_space_saving_replacement():
    ca = CounterArray(one_set(2))
    ca.update([10, 10, 11])
    assert entries(ca) == [[(10, 2), (11, 1)]]
    ca.update([12])                       # full: replace the smallest (11, 1) -> (12, 2)
    assert entries(ca) == [[(10, 2), (12, 2)]]
    ca.update([13])                       # tie at 2: the lowest way goes -> (13, 3)
    assert entries(ca) == [[(13, 3), (12, 2)]]


def test_saturation_of_hits_and_newcomers():
    ca = CounterArray(one_set(1, bits=2))
    ca.update([5] * 7)
    assert entries(ca) == [[(5, 3)]]      # saturates at 2**2 - 1
    ca.update([6])
    assert entries(ca) == [[(6, 3)]]      # newcomer: min(3 + 1, 3)


def test_aging_halves_and_keeps_entries():
    ca = CounterArray(one_set(2))
    ca.update([1, 1, 1, 2])
    ca.age()
    assert entries(ca) == [[(1, 1), (2, 0)]]
    ca.update([3])                        # count 0 is the smallest: replaced, newcomer 1
    assert entries(ca) == [[(1, 1), (3, 1)]]


def test_clear():
    ca = CounterArray(one_set(2))
    ca.update([1, 2, 3])
    ca.clear()
    assert entries(ca) == [[None, None]]


def test_install_order_is_count_desc_then_position():
    ca = CounterArray(one_set(4, sets=1))
    ca.update([7, 8, 8, 9, 9, 10])        # ways: 7:1, 8:2, 9:2, 10:1
    keys, counts = ca.install_candidates(1)
    assert keys.tolist() == [8, 9, 7, 10] and counts.tolist() == [2, 2, 1, 1]
    keys, _ = ca.install_candidates(2)
    assert keys.tolist() == [8, 9]


def ref_counters(stream, sets_of, ways, cmax):
    """A plain re-statement of the rules: per set a list of [key, count] ways."""
    table = {}
    for k, s in zip(stream, sets_of):
        row = table.setdefault(s, [])
        for e in row:
            if e[0] == k:
                e[1] = min(e[1] + 1, cmax)
                break
        else:
            if len(row) < ways:
                row.append([k, 1])
            else:
                w = min(range(ways), key=lambda i: (row[i][1], i))
                row[w] = [k, min(row[w][1] + 1, cmax)]
    return {k: c for row in table.values() for k, c in row}


@given(st.lists(st.integers(0, 40), max_size=300), st.integers(1, 4), st.sampled_from([1, 2, 4]),
       st.sampled_from([2, 3, 8]))
def test_matches_plain_reference(stream, ways, sets, bits):
    cfg = one_set(ways, bits=bits, sets=sets)
    ca = CounterArray(cfg)
    ca.update(stream)
    sets_of = ca.set_of(np.array(stream, dtype=np.uint64)).tolist()
    assert ca.tracked() == ref_counters(stream, sets_of, ways, cfg.counter_max)


@given(st.lists(st.integers(0, 30), max_size=400), st.integers(1, 4), st.sampled_from([1, 2, 4]))
def test_space_saving_bound(stream, ways, sets):
    """With aging off and no saturation, a key whose frequency in its set exceeds
    (lookups to that set) / ways is tracked, and no tracked count underestimates."""
    ca = CounterArray(one_set(ways, bits=20, sets=sets))
    ca.update(stream)
    set_of = dict(zip(stream, ca.set_of(np.array(stream, dtype=np.uint64)).tolist()))
    freq = Counter(stream)
    per_set = Counter(set_of[k] for k in stream)
    tracked = ca.tracked()
    for k, f in freq.items():
        if f * ways > per_set[set_of[k]]:
            assert k in tracked, (k, f, per_set[set_of[k]])
    for k, c in tracked.items():
        assert c >= freq[k]


def test_many_sets_spread_the_keys():
    cfg = preset("ulx3s")
    ca = CounterArray(cfg)
    ca.update(np.arange(4 * cfg.counter_sets, dtype=np.uint64))
    valid, _, _ = ca.state()
    assert valid.mean() > 0.7               # the hash spreads sequential keys over the sets
