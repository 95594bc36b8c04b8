"""The fragmenter model: a hand-computed mini-batch, corner cases, and properties."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from golden.algorithmic import fragment_samples
from golden.cam import Cam
from golden.fragment import fragment
from golden.records import TAG_OVERFLOW as O, TAG_POPULAR as P, TAG_STAGED as S
from hotline_hw.config import preset
from hotline_hw.hashing import SEED_DEDUP, h3

CFG = preset("tiny")


def k(t, r):
    return (t << CFG.row_bits) | r


def run(samples, cam_keys=(), cfg=CFG, bank=0):
    cam = Cam(cfg)
    for slot, key in enumerate(cam_keys):
        assert cam.write(slot, key)
    keys = np.array([x for s in samples for x in s], dtype=np.uint64)
    return cam, fragment(cfg, cam, keys, [len(s) for s in samples], bank)


def test_hand_computed_minibatch():
    samples = [[k(0, 5), k(1, 7)],         # all hit: popular
               [k(0, 5), k(2, 9)],         # one miss: staged 0
               [k(2, 9), k(0, 1)],         # reuse 0, new 1
               [k(3, 4)],                  # table 3 >= num_tables: bad key
               []]                         # no lookups: popular
    _, r = run(samples, cam_keys=[k(0, 5), k(1, 7)], bank=1)
    assert r.popular.samples() == [(0, [(P, 0), (P, 1)]), (4, [])]
    assert r.nonpopular.samples() == [(1, [(P, 0), (S, 0)]), (2, [(S, 0), (S, 1)]),
                                      (3, [(O, k(3, 4))])]
    assert r.gather_keys.tolist() == [k(2, 9), k(0, 1)] and r.gather_indices.tolist() == [0, 1]
    c = r.counters
    assert (c.lookups, c.hits, c.popular_samples, c.nonpopular_samples) == (7, 3, 2, 3)
    assert (c.staged_rows, c.overflows, c.bad_keys, c.long_samples) == (2, 1, 1, 0)
    assert r.bank == 1


def test_long_sample_overflows_past_the_limit_and_is_non_popular():
    hot = k(0, 1)
    _, r = run([[hot] * 10], cam_keys=[hot])
    assert r.popular.n_samples == 0
    (sid, lk), = r.nonpopular.samples()
    assert lk == [(P, 0)] * 8 + [(O, hot)] * 2
    assert r.counters.long_samples == 1 and r.counters.overflows == 2


def test_misses_past_staging_rows_overflow_and_repeat_as_overflow():
    cfg = CFG.replace(dedup_sets=64)
    keys = [k(0, 100 + i) for i in range(20)]
    _, r = run([keys[i:i + 5] for i in range(0, 20, 5)] + [keys[15:]], cfg=cfg)
    first = [x for _, rec in r.nonpopular.samples()[:4] for x in rec]
    assert first[:16] == [(S, i) for i in range(16)]
    assert first[16:] == [(O, x) for x in keys[16:]]
    assert r.nonpopular.samples()[4][1] == [(S, 15)] + [(O, x) for x in keys[16:]]
    assert r.counters.staging_full == 8 and r.counters.staged_rows == 16   # per lookup
    assert len(r.gather_keys) == 16


def test_full_dedup_set_overflows_but_later_sets_still_stage():
    cfg = CFG.replace(staging_rows=4, dedup_sets=2, dedup_ways=2)
    same = [x for x in (k(0, r) for r in range(1, 200))
            if h3(x, SEED_DEDUP, cfg.key_bits, 1) == 0][:3]
    other = next(x for x in (k(1, r) for r in range(1, 200)) if h3(x, SEED_DEDUP, cfg.key_bits, 1) == 1)
    _, r = run([same + [other, same[2]]], cfg=cfg)
    assert r.nonpopular.samples()[0][1] == [(S, 0), (S, 1), (O, same[2]), (S, 2), (O, same[2])]
    assert r.counters.dedup_full == 2 and r.counters.staging_full == 0    # per lookup
    assert r.unique_misses == 4


def test_sample_ids_wrap_and_are_flagged():
    cfg = CFG.replace(sample_id_bits=2)
    _, r = run([[k(0, i)] for i in range(6)], cfg=cfg)
    assert r.nonpopular.sample_ids.tolist() == [0, 1, 2, 3, 0, 1]
    assert r.counters.id_wraps == 1


# --- properties -----------------------------------------------------------------------------

keys_st = st.builds(lambda t, r: k(t, r), st.integers(0, 3), st.integers(0, 12))
batch_st = st.lists(st.lists(keys_st, max_size=11), max_size=12)
cam_st = st.lists(keys_st, max_size=16, unique=True)


def reconstruct(cam, r, rec):
    out = []
    gk = r.gather_keys.tolist()
    for tag, v in rec:
        out.append(int(cam.keys[v]) if tag == P else gk[v] if tag == S else v)
    return out


@given(batch_st, cam_st, st.sampled_from([CFG, CFG.replace(staging_rows=4, dedup_sets=2, dedup_ways=2)]))
def test_every_lookup_leaves_exactly_once_in_order(samples, cam_keys, cfg):
    cam, r = run(samples, cam_keys, cfg)
    out = {}
    for mb in (r.popular, r.nonpopular):
        ids = mb.sample_ids.tolist()
        assert ids == sorted(ids)                        # order kept within each output
        for sid, rec in mb.samples():
            assert sid not in out
            out[sid] = reconstruct(cam, r, rec)
    assert [out[i] for i in range(len(samples))] == samples
    assert r.counters.lookups == sum(map(len, samples))


@given(batch_st, cam_st)
def test_popular_iff_all_lookups_hit(samples, cam_keys):
    _, r = run(samples, cam_keys)
    for sid, rec in r.popular.samples():
        assert all(t == P for t, _ in rec)
        assert all(x in cam_keys for x in samples[sid])
    for sid, rec in r.nonpopular.samples():
        assert any(t != P for t, _ in rec)


@given(batch_st, cam_st, st.sampled_from([CFG, CFG.replace(staging_rows=4, dedup_sets=2, dedup_ways=2)]))
def test_staging_indices_are_dense_and_deduplicated(samples, cam_keys, cfg):
    cam, r = run(samples, cam_keys, cfg)
    assert r.gather_indices.tolist() == list(range(len(r.gather_keys)))
    assert len(set(r.gather_keys.tolist())) == len(r.gather_keys) <= cfg.staging_rows
    staged = {}
    for _, rec in r.nonpopular.samples():
        for tag, v in rec:
            if tag == S:
                staged.setdefault(v, 0)
    assert sorted(staged) == list(range(len(r.gather_keys)))


@given(batch_st, cam_st)
def test_bad_keys_never_vanish(samples, cam_keys):
    _, r = run(samples, cam_keys)
    bad = [x for s in samples for x in s if x >> CFG.row_bits >= CFG.num_tables]
    out = [v for _, rec in r.nonpopular.samples() for t, v in rec if t == O and v >> CFG.row_bits >= CFG.num_tables]
    assert sorted(out) == sorted(bad) and r.counters.bad_keys == len(bad)


@given(st.lists(st.lists(st.builds(lambda t, r: k(t, r), st.integers(0, 2), st.integers(0, 12)),
                         max_size=8), max_size=12), cam_st)
def test_agrees_with_the_algorithmic_reference_when_nothing_overflows(samples, cam_keys):
    cfg = CFG.replace(staging_rows=256, dedup_sets=256, dedup_ways=4)
    cam, r = run(samples, cam_keys, cfg)
    pop, non, staging, gather = fragment_samples(samples, cam_keys)
    assert r.popular.sample_ids.tolist() == pop and r.nonpopular.sample_ids.tolist() == non
    assert r.gather_keys.tolist() == gather
    recs = dict(r.nonpopular.samples())
    for sid in non:
        assert [v if t == S else None for t, v in recs[sid]] == staging[sid]
