"""Stream framing: input beats <-> samples, output micro-batches <-> beats."""
import numpy as np
from hypothesis import given, strategies as st

from golden.cam import Cam
from golden.fragment import fragment
from golden.framing import (frame_lookup_beats, pack_output_beats, parse_lookup_beats,
                            unpack_output_beats)
from golden.records import TAG_POPULAR as P, TAG_STAGED as S
from hotline_hw.config import preset

samples_st = st.lists(st.lists(st.integers(1, 4000), max_size=9), max_size=8)


@given(st.lists(samples_st, min_size=1, max_size=3), st.sampled_from([1, 2, 4, 8]),
       st.floats(0, 0.6), st.floats(0, 1), st.integers(0, 99))
def test_input_framing_round_trips(batches, lanes, holes, empty_end, seed):
    rng = np.random.default_rng(seed)
    beats = [b for mb in batches for b in frame_lookup_beats(mb, lanes, rng=rng, hole_prob=holes,
                                                             empty_end_prob=empty_end)]
    got = parse_lookup_beats(beats, lanes)
    assert got.minibatches == batches
    assert got.ended_mid_sample == 0 and got.unterminated == 0
    for b in beats:
        assert 0 <= b["keep"] < 1 << lanes and len(b["keys"]) == lanes


def test_one_hot_sample_takes_ceil_n_over_lanes_beats():
    beats = frame_lookup_beats([list(range(1, 27))], 4)
    assert len(beats) == 7 and beats[-1]["keep"] == 0b11 and beats[-1]["user"] == beats[-1]["last"] == 1
    assert [b["user"] for b in beats] == [0] * 6 + [1]


def test_empty_samples_and_empty_minibatch():
    beats = frame_lookup_beats([[], [5]], 2)
    assert beats == [{"keys": [0, 0], "keep": 0, "user": 1, "last": 0},
                     {"keys": [5, 0], "keep": 1, "user": 1, "last": 1}]
    assert parse_lookup_beats(frame_lookup_beats([], 2), 2).minibatches == [[]]


def test_framing_errors_are_counted_and_nothing_is_lost():
    beats = [{"keys": [1, 2], "keep": 3, "user": 0, "last": 1},      # ends mid-sample
             {"keys": [3, 0], "keep": 1, "user": 1, "last": 0},
             {"keys": [4, 0], "keep": 1, "user": 0, "last": 0}]      # the stream stops
    got = parse_lookup_beats(beats, 2)
    assert got.minibatches == [[[1, 2]], [[3], [4]]]
    assert got.ended_mid_sample == 1 and got.unterminated == 1


@given(samples_st, st.lists(st.integers(1, 4000), max_size=16, unique=True),
       st.sampled_from([1, 2, 4]))
def test_output_packing_round_trips(samples, cam_keys, lanes):
    cfg = preset("tiny", lanes=lanes, max_sample_lookups=max(8, lanes), dedup_sets=64)
    cam = Cam(cfg)
    for slot, k in enumerate(cam_keys):
        cam.write(slot, k)
    keys = np.array([k for s in samples for k in s], dtype=np.uint64)
    r = fragment(cfg, cam, keys, [len(s) for s in samples], 0)
    for micro in (r.popular, r.nonpopular):
        beats = pack_output_beats(micro, lanes)
        assert unpack_output_beats(beats, lanes) == micro.samples()
        assert sum(b["last"] for b in beats) == 1


def test_empty_micro_batch_is_one_end_beat():
    cfg = preset("tiny")
    r = fragment(cfg, Cam(cfg), np.array([5], dtype=np.uint64), [1], 0)
    beats = pack_output_beats(r.popular, 2)
    assert beats == [{"sample_id": 0, "lookups": [(0, 0), (0, 0)], "keep": 0, "user": 0, "last": 1}]
    assert unpack_output_beats(beats, 2) == []
    (b,) = pack_output_beats(r.nonpopular, 2)
    assert b["lookups"][0] == (S, 0) and b["keep"] == 1 and b["user"] == b["last"] == 1
