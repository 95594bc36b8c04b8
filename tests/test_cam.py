import numpy as np
import pytest

from golden.cam import Cam
from hotline_hw.config import preset
from hotline_hw.hashing import SEED_CAM, h3


def hash_cfg():
    return preset("ulx3s", cam_entries=8, cam_ways=2)


def keys_in_set(cfg, s, n, start=1):
    out, k = [], start
    while len(out) < n:
        if h3(k, SEED_CAM, cfg.key_bits, cfg.cam_set_bits) == s:
            out.append(k)
        k += 1
    return out


def test_full_cam_slots_in_install_order_and_lookup():
    cfg = preset("tiny")
    cam = Cam(cfg)
    cand = np.arange(100, 120, dtype=np.uint64)
    r = cam.install(cand)
    assert r.slots.tolist() == list(range(16)) and r.keys.tolist() == list(range(100, 116))
    assert r.skipped == 0
    hit, slot = cam.lookup(np.array([100, 115, 116, 5], dtype=np.uint64))
    assert hit.tolist() == [True, True, False, False] and slot.tolist() == [0, 15, 0, 0]


def test_full_cam_duplicate_key_returns_lowest_slot():
    cam = Cam(preset("tiny"))
    assert cam.write(9, 42) and cam.write(3, 42)
    hit, slot = cam.lookup(np.array([42], dtype=np.uint64))
    assert hit[0] and slot[0] == 3


def test_empty_cam_misses():
    cam = Cam(preset("tiny"))
    hit, slot = cam.lookup(np.array([0, 1], dtype=np.uint64))
    assert not hit.any()


def test_hash_cam_slot_is_set_times_ways_plus_way_and_full_sets_skip():
    cfg = hash_cfg()
    cam = Cam(cfg)
    a, b, c = keys_in_set(cfg, 2, 3)
    (d,) = keys_in_set(cfg, 1, 1)
    r = cam.install(np.array([a, b, c, d], dtype=np.uint64))
    assert r.keys.tolist() == [a, b, d]
    assert r.slots.tolist() == [2 * 2 + 0, 2 * 2 + 1, 1 * 2 + 0]
    assert r.skipped == 1 and r.considered == 4
    hit, slot = cam.lookup(np.array([a, b, c, d], dtype=np.uint64))
    assert hit.tolist() == [True, True, False, True] and slot.tolist() == [4, 5, 0, 2]


def test_hash_cam_install_stops_when_full():
    cfg = hash_cfg()
    cam = Cam(cfg)
    cand = np.concatenate([keys_in_set(cfg, s, 3, start=1000) for s in range(4)]).astype(np.uint64)
    r = cam.install(cand)
    # set 3's third candidate is never considered: the CAM is full before it
    assert len(r.keys) == 8 and r.skipped == 3 and cam.valid.all()
    assert r.considered == len(cand) - 1


def test_hash_cam_write_must_use_the_keys_set():
    cfg = hash_cfg()
    cam = Cam(cfg)
    (k,) = keys_in_set(cfg, 3, 1)
    assert not cam.write(0, k)              # set 0: rejected
    assert cam.contents() == {}
    assert cam.write(7, k)                  # set 3, way 1
    assert cam.contents() == {7: k}
    assert not cam.write(8, k)              # out of range
    assert cam.write(7, 0, valid=False) and cam.contents() == {}
