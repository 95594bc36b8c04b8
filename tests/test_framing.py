"""Stream framing: input beats <-> samples, output micro-batches <-> beats."""
import numpy as np
from hypothesis import given, strategies as st

from golden.cam import Cam
from golden.fragment import fragment
from golden.framing import (frame_lookup_beats, output_beats, parse_lookup_beats,
                            terminator_beat, unpack_output_beats)
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
       st.sampled_from([1, 2, 4]), st.floats(0, 0.6), st.floats(0, 1), st.integers(0, 99))
def test_output_framing_mirrors_the_input(samples, cam_keys, lanes, holes, empty_end, seed):
    cfg = preset("tiny", lanes=lanes, max_sample_lookups=max(8, lanes), dedup_sets=64)
    cam = Cam(cfg)
    for slot, k in enumerate(cam_keys):
        cam.write(slot, k)
    beats = frame_lookup_beats(samples, lanes, rng=np.random.default_rng(seed),
                               hole_prob=holes, empty_end_prob=empty_end)
    keys = np.array([k for s in samples for k in s], dtype=np.uint64)
    r = fragment(cfg, cam, keys, [len(s) for s in samples], 0)
    pop, npop = output_beats(cfg, beats, r)
    for micro, out in ((r.popular, pop), (r.nonpopular, npop)):
        assert unpack_output_beats(out, lanes) == micro.samples()
        assert sum(b["last"] for b in out) == 1
    # every input beat that carries keys or ends a sample leaves exactly once, keep unchanged
    data = [b for b in beats if b["keep"] or b["user"]]
    assert sorted(b["keep"] for b in pop[:-1] + npop[:-1]) == sorted(b["keep"] for b in data)


def test_micro_batches_end_with_a_terminator():
    cfg = preset("tiny")
    r = fragment(cfg, Cam(cfg), np.array([5], dtype=np.uint64), [1], 0)
    pop, npop = output_beats(cfg, frame_lookup_beats([[5]], 2), r)
    assert pop == [terminator_beat(2)]
    assert unpack_output_beats(pop, 2) == []
    b, t = npop
    assert b["lookups"] == [(S, 0), (0, 0)] and b["keep"] == 1 and b["user"] == 1
    assert b["last"] == 0 and t == terminator_beat(2)


def test_a_minibatch_ending_mid_sample_closes_the_sample():
    cfg = preset("tiny")
    beats = [{"keys": [5, 6], "keep": 3, "user": 0, "last": 1}]
    (mb,) = parse_lookup_beats(beats, 2).minibatches
    r = fragment(cfg, Cam(cfg), np.array(mb[0], dtype=np.uint64), [2], 0)
    _, npop = output_beats(cfg, beats, r)
    assert npop[0]["user"] == 1 and npop[0]["keep"] == 3 and npop[1] == terminator_beat(2)
