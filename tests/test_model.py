"""The whole bit-accurate model with memory: the final host memory must be exactly what
the modelled GPU's additions predict, whatever the command order."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from golden import synth
from golden.memory import SparseMemory
from golden.model import HotlineModel, ProtocolError, fill_tables
from golden.params import layout
from hotline_hw.config import preset

CFG = preset("tiny")


def setup(cfg=CFG, batches=16, seed=0, bad=0.02, zipf=1.1):
    tr = synth.generate("tiny", batches=batches, seed=seed, bad_key_rate=bad, zipf=zipf)
    card = tr.cardinalities[:cfg.num_tables]
    p = layout(cfg, card, learn_threshold=2)
    mem = SparseMemory()
    fill_tables(mem, cfg, p, card, seed=seed)
    return tr, p, mem, HotlineModel(cfg, p, mem)


def batch(tr, cfg, b):
    sub = tr.batches(b, b + 1)
    return sub.keys(cfg), sub.sample_lengths


def expected_memory(tr, cfg, p, initial, batches):
    """Oracle, independent of the model: every valid lookup of a trained mini-batch adds 1
    to each 32-bit word of its host row, once everything is written back."""
    exp = SparseMemory()
    exp.pages = {n: pg.copy() for n, pg in initial.pages.items()}
    uses = {}
    for b in batches:
        keys, _ = batch(tr, cfg, b)
        for key in keys.tolist():
            if key >> cfg.row_bits < cfg.num_tables:
                uses[key] = uses.get(key, 0) + 1
    for key, n in uses.items():
        exp.add_words(p.host_addr(cfg, key), p.row_bytes, n)
    return exp


def host_diff(mem, exp, p):
    """Differences within the host tables (the device regions hold copies)."""
    d = mem.diff(exp, limit=10**9)
    return [x for x in d if x[0] < p.popular_base][:8]


def learn_and_install(m, tr, cfg, learn):
    m.start_learning()
    for b in range(learn):
        m.minibatch(*batch(tr, cfg, b), learn=True, train=False)
    return m.install()


def test_install_copies_rows_to_their_slots():
    tr, p, mem, m = setup()
    before = SparseMemory()
    before.pages = {n: pg.copy() for n, pg in mem.pages.items()}
    r = learn_and_install(m, tr, CFG, 4)
    assert len(r.keys) > 0
    for key, slot in zip(r.keys.tolist(), r.slots.tolist()):
        assert (mem.read(p.popular_addr(slot), p.row_bytes) ==
                before.read(p.host_addr(CFG, key), p.row_bytes)).all()
    assert m.cam.contents() == dict(zip(r.slots.tolist(), r.keys.tolist()))


@pytest.mark.parametrize("cfg", [CFG, CFG.replace(staging_rows=4, dedup_sets=2, dedup_ways=2),
                                 preset("ulx3s", num_tables=3, table_bits=2, row_bits=10,
                                        cam_entries=32, cam_ways=4, staging_rows=16,
                                        dedup_sets=8, dedup_ways=4, max_sample_lookups=8,
                                        row_bytes=32)])
def test_sequential_flow_final_memory(cfg):
    tr, p, mem, m = setup(cfg)
    initial = SparseMemory()
    initial.pages = {n: pg.copy() for n, pg in mem.pages.items()}
    learn_and_install(m, tr, cfg, 4)
    for b in range(4, 14):
        keys, lens = batch(tr, cfg, b)
        res = m.minibatch(keys, lens, learn=True)
        m.gpu_update(res, keys)
        m.scatter(res.bank)
    m.evict()
    assert m.totals.overflows > 0 or cfg is CFG
    diff = host_diff(mem, expected_memory(tr, cfg, p, initial, range(4, 14)), p)
    assert not diff, diff


@settings(max_examples=25)
@given(st.integers(0, 10_000), st.lists(st.booleans(), min_size=10, max_size=10))
def test_pipelined_flow_sees_scattered_values(seed, early):
    """Train mini-batch i+1 before scattering i (as a pipelined host does) whenever
    early[i]: a gather of a row still waiting for its scatter must see the scattered value,
    so the final memory is the same as in program order."""
    tr, p, mem, m = setup(seed=seed, zipf=1.3)
    initial = SparseMemory()
    initial.pages = {n: pg.copy() for n, pg in mem.pages.items()}
    learn_and_install(m, tr, CFG, 3)
    pending = None
    for i, b in enumerate(range(3, 13)):
        keys, lens = batch(tr, CFG, b)
        res = m.minibatch(keys, lens)
        if pending is not None:                 # the previous bank: GPU done, scatter now
            m.scatter(pending.bank)
        m.gpu_update(res, keys)
        if early[i]:
            pending = res
        else:
            m.scatter(res.bank)
            pending = None
    if pending is not None:
        m.scatter(pending.bank)
    m.evict()
    diff = host_diff(mem, expected_memory(tr, CFG, p, initial, range(3, 13)), p)
    assert not diff, diff


def test_reinstall_writes_back_the_old_popular_set():
    tr, p, mem, m = setup()
    initial = SparseMemory()
    initial.pages = {n: pg.copy() for n, pg in mem.pages.items()}
    learn_and_install(m, tr, CFG, 3)
    for b in range(3, 8):
        keys, lens = batch(tr, CFG, b)
        res = m.minibatch(keys, lens, learn=True)
        m.gpu_update(res, keys)
        m.scatter(res.bank)
    m.install()                                  # re-learn: evict, then install anew
    for b in range(8, 12):
        keys, lens = batch(tr, CFG, b)
        res = m.minibatch(keys, lens)
        m.gpu_update(res, keys)
        m.scatter(res.bank)
    m.evict()
    assert not host_diff(mem, expected_memory(tr, CFG, p, initial, range(3, 12)), p)


def test_protocol_errors():
    tr, p, mem, m = setup()
    learn_and_install(m, tr, CFG, 2)
    r0 = m.minibatch(*batch(tr, CFG, 2))
    m.minibatch(*batch(tr, CFG, 3))
    with pytest.raises(ProtocolError, match="bank 0 reused before SCATTER"):
        m.minibatch(*batch(tr, CFG, 4))
    with pytest.raises(ProtocolError, match="INSTALL while staging banks wait"):
        m.install()


def test_learn_period_samples_every_nth_minibatch():
    tr, p, mem, _ = setup()
    m = HotlineModel(CFG, p.__class__(**{**p.__dict__, "learn_period": 3}))
    m.start_learning()
    for b in range(7):
        m.minibatch(*batch(tr, CFG, b), learn=True, train=False)
    assert m.sampled == 3                        # mini-batches 0, 3, 6
    valid = sum(int((batch(tr, CFG, b)[0] >> CFG.row_bits < CFG.num_tables).sum()) for b in (0, 3, 6))
    assert m.totals.learned_lookups == valid


def test_aging_period():
    cfg = CFG.replace(aging_period=2, counter_sets=1, counter_banks=1, counter_ways=1)
    m = HotlineModel(cfg)
    m.start_learning()
    key = np.array([5] * 8, dtype=np.uint64)
    m.minibatch(key, None, learn=True, train=False)
    assert m.counters.count_of(5) == 8
    m.minibatch(key, None, learn=True, train=False)
    assert m.counters.count_of(5) == 8           # 16 halved after the 2nd sampled batch
