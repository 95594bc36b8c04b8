"""golden.synth: presets, framing, determinism, exact Zipf sampling, permutation, bad keys."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from golden.synth import WORKLOADS, Workload, generate, rows_of_ranks
from golden.trace import TraceError
from hotline_hw.config import preset


def zipf_pmf(n, s):
    p = np.arange(1, n + 1, dtype=np.float64) ** -s
    return p / p.sum()


def table_rows(trace, table):
    return trace.rows[trace.tables == table].astype(np.int64)


# --- presets and framing -----------------------------------------------------------------

def test_presets_match_workloads_md():
    assert WORKLOADS["kaggle"].cardinalities[2] == 10131227
    assert sum(WORKLOADS["kaggle"].cardinalities) == 33_762_577
    assert sum(WORKLOADS["terabyte"].cardinalities) == 187_767_399
    assert WORKLOADS["dlrmv2"].lookups_per_sample == 214
    assert WORKLOADS["dlrmv2"].cardinalities == WORKLOADS["terabyte"].cardinalities
    assert WORKLOADS["taobao"].cardinalities == (987_994, 4_162_024, 9_439)
    assert WORKLOADS["taobao"].lookups_per_table == (1, 20, 20)
    assert [WORKLOADS[n].batch_size for n in ("kaggle", "terabyte", "dlrmv2", "taobao")] == \
        [1024, 2048, 2048, 256]
    assert WORKLOADS["tiny"].uniform_below == 0 and WORKLOADS["kaggle"].uniform_below == 100_000


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_framing(name):
    wl = WORKLOADS[name]
    tr = generate(name, batches=3, batch_size=5, seed=1)
    assert tr.name == name and tr.cardinalities == wl.cardinalities
    assert tr.batch_sizes.tolist() == [5, 5, 5]
    assert tr.sample_lengths.tolist() == [wl.lookups_per_sample] * 15
    pattern = np.repeat(np.arange(wl.num_tables), wl.lookups_per_table)
    assert (tr.tables.reshape(15, -1) == pattern).all()
    assert tr.tables.dtype == np.uint8 and tr.rows.dtype == np.uint32
    card = np.asarray(wl.cardinalities)[tr.tables]
    assert (tr.rows < card).all()


def test_default_batch_size_and_one_batch():
    tr = generate("taobao")
    assert tr.batch_sizes.tolist() == [256]
    assert tr.n_lookups == 256 * 41


def test_lookups_round_up_to_whole_batches():
    tr = generate("kaggle", lookups=1000, batch_size=10)
    assert tr.n_batches == 4 and tr.n_lookups == 1040  # 1000 / 260 per batch -> 4 batches
    assert generate("kaggle", lookups=260, batch_size=10).n_batches == 1


def test_meta():
    tr = generate("tiny", batches=1, zipf=1.2, seed=7, bad_key_rate=0.25)
    assert {k: tr.meta[k] for k in ("generator", "workload", "zipf", "seed", "batch_size",
                                    "bad_key_rate")} == \
        {"generator": "golden.synth", "workload": "tiny", "zipf": 1.2, "seed": 7,
         "batch_size": 16, "bad_key_rate": 0.25}


@pytest.mark.parametrize("args", [((), ()), ((5, 6), (1,)), ((0,), (1,)), ((5,), (0,))])
def test_bad_custom_workload(args):
    with pytest.raises(TraceError, match="workload 'w': needs one cardinality"):
        Workload("w", *args, 8, "test")


def test_custom_workload_and_wide_dtypes():
    wl = Workload("wide", (2**33,) * 300, (1,) * 300, 2, "test")
    tr = generate(wl, batches=1)
    assert tr.tables.dtype == np.uint16 and tr.rows.dtype == np.uint64
    assert tr.tables.max() == 299 and (tr.rows < 2**33).all()


# --- determinism and stream independence -------------------------------------------------

def test_same_seed_same_trace_other_seed_other_trace():
    a = generate("kaggle", batches=2, seed=3, bad_key_rate=0.01)
    b = generate("kaggle", batches=2, seed=3, bad_key_rate=0.01)
    c = generate("kaggle", batches=2, seed=4, bad_key_rate=0.01)
    assert (a.tables == b.tables).all() and (a.rows == b.rows).all()
    assert (a.rows != c.rows).mean() > 0.5
    assert (a.tables != c.tables).any()


def test_tables_draw_from_independent_streams():
    base = Workload("a", (1000, 500_000), (1, 2), 8, "test")
    other = Workload("b", (77, 500_000), (3, 2), 8, "test")  # table 0 changed
    a, b = generate(base, batches=4, seed=5), generate(other, batches=4, seed=5)
    assert (table_rows(a, 1) == table_rows(b, 1)).all()
    # the exponent changes Zipf tables only
    u1 = generate("kaggle", batches=1, zipf=1.05)
    u2 = generate("kaggle", batches=1, zipf=1.2)
    assert (table_rows(u1, 0) == table_rows(u2, 0)).all()       # 1460 rows: uniform
    assert (table_rows(u1, 2) != table_rows(u2, 2)).any()       # 10M rows: Zipf


# --- skew ----------------------------------------------------------------------------------

@pytest.mark.parametrize("s", [1.05, 1.2])
def test_top_ranks_follow_zipf(s):
    n, draws = 300_000, 400_000
    tr = generate(Workload("one", (n,), (1,), 1000, "test"), batches=draws // 1000, zipf=s,
                  seed=11)
    counts = np.bincount(tr.rows.astype(np.int64), minlength=n)
    top = rows_of_ranks(np.arange(30), cardinality=n, table=0, seed=11).astype(np.int64)
    expect = zipf_pmf(n, s)[:30] * draws
    sigma = np.sqrt(expect * (1 - expect / draws))
    assert (np.abs(counts[top] - expect) < 5 * sigma).all()
    assert counts[top].sum() > 0.3 * draws


@pytest.mark.parametrize("s", [0.5, 1.0, 1.5, 3.0])
def test_whole_distribution_is_zipf(s):
    """Chi-square over every rank of a small table: the tail must be right as well."""
    n, draws = 500, 200_000
    tr = generate(Workload("one", (n,), (1,), 1000, "test", uniform_below=0),
                  batches=draws // 1000, zipf=s, seed=2)
    ranks_to_rows = rows_of_ranks(np.arange(n), cardinality=n, table=0, seed=2).astype(np.int64)
    counts = np.bincount(tr.rows.astype(np.int64), minlength=n)[ranks_to_rows]
    expect = zipf_pmf(n, s) * draws
    keep = expect >= 5
    dof = keep.sum() - 1
    chi2 = ((counts[keep] - expect[keep]) ** 2 / expect[keep]).sum()
    assert chi2 < dof + 6 * math.sqrt(2 * dof)


def test_permutation_moves_hot_rows():
    n = WORKLOADS["kaggle"].cardinalities[2]
    hot = rows_of_ranks(np.arange(1000), cardinality=n, table=2, seed=0).astype(np.int64)
    assert hot[0] != 0
    assert np.median(hot) > n / 4  # spread over the table, not the small integers
    tr = generate("kaggle", batches=20, seed=0)
    rows = table_rows(tr, 2)
    assert np.bincount(rows).argmax() == hot[0]
    assert (rows < 1000).mean() < 0.01


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 3000), table=st.integers(0, 40), seed=st.integers(0, 2**32))
def test_rows_of_ranks_is_a_permutation(n, table, seed):
    rows = rows_of_ranks(np.arange(n), cardinality=n, table=table, seed=seed)
    assert np.array_equal(np.sort(rows), np.arange(n))


def test_small_tables_uniform_large_ones_skewed():
    tr = generate("kaggle", batches=60, seed=9)
    n = WORKLOADS["kaggle"].cardinalities[0]  # 1460 rows, below 100,000: uniform
    counts = np.bincount(table_rows(tr, 0), minlength=n)
    expect = tr.n_samples / n
    chi2 = ((counts - expect) ** 2 / expect).sum()
    assert chi2 < (n - 1) + 6 * math.sqrt(2 * (n - 1))
    skewed = np.bincount(table_rows(generate("tiny", batches=200, seed=9), 0), minlength=1000)
    expect = 200 * 16 / 1000
    assert ((skewed - expect) ** 2 / expect).sum() > 10 * 999  # tiny: Zipf on every table


# --- bad keys ------------------------------------------------------------------------------

def test_no_bad_keys_by_default():
    tr = generate("tiny", batches=100)
    assert tr.tables.max() < 3


@pytest.mark.parametrize("name, rate, bits, row_bits", [("tiny", 0.1, 2, 10),
                                                         ("kaggle", 0.03, 5, 24)])
def test_bad_key_rate(name, rate, bits, row_bits):
    tr = generate(name, lookups=60_000, bad_key_rate=rate, seed=4)
    nt = WORKLOADS[name].num_tables
    bad = tr.tables >= nt
    assert abs(bad.mean() - rate) < 6 * math.sqrt(rate * (1 - rate) / tr.n_lookups)
    assert tr.tables.max() < 2**bits and tr.rows.max() < 2**row_bits
    assert len(np.unique(tr.tables[bad])) == 2**bits - nt  # every invalid id is used
    assert (tr.rows[~bad] < np.asarray(WORKLOADS[name].cardinalities)[tr.tables[~bad]]).all()


def test_bad_keys_fit_the_tiny_configuration():
    cfg = preset("tiny")
    tr = generate("tiny", batches=50, bad_key_rate=0.2)
    keys = tr.keys(cfg)
    assert (keys >> np.uint64(cfg.row_bits) == 3).sum() == (tr.tables == 3).sum() > 0


def test_table_bits():
    tr = generate("kaggle", batches=1, bad_key_rate=0.5, table_bits=8)
    assert tr.tables.max() >= 128 and tr.meta["table_bits"] == 8
    four = Workload("four", (10,) * 4, (1,) * 4, 64, "test")
    assert generate(four, batches=4, bad_key_rate=0.5).tables.max() == 7  # 4 tables -> 3 bits
    with pytest.raises(TraceError, match=r"table_bits=1: leaves no invalid table id"):
        generate("tiny", bad_key_rate=0.1, table_bits=1)


# --- validation ------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, name", [
    ({"workload": "criteo"}, "workload"),
    ({"zipf": 0}, "zipf"), ({"zipf": -1.1}, "zipf"), ({"zipf": float("nan")}, "zipf"),
    ({"zipf": float("inf")}, "zipf"), ({"zipf": "1.1"}, "zipf"),
    ({"batches": 0}, "batches"), ({"batches": -2}, "batches"), ({"batches": 1.5}, "batches"),
    ({"batches": True}, "batches"),
    ({"lookups": 0}, "lookups"), ({"lookups": -5}, "lookups"),
    ({"batch_size": 0}, "batch_size"), ({"batch_size": -1}, "batch_size"),
    ({"bad_key_rate": 1.0}, "bad_key_rate"), ({"bad_key_rate": -0.01}, "bad_key_rate"),
    ({"seed": -1}, "seed"), ({"table_bits": 0}, "table_bits"), ({"table_bits": 17}, "table_bits"),
])
def test_validation_errors_name_the_parameter(kwargs, name):
    with pytest.raises(TraceError) as info:
        generate(**kwargs)
    message = str(info.value)
    assert message.startswith(f"generate: {name}=") and "\n" not in message


def test_batches_and_lookups_exclusive():
    with pytest.raises(TraceError, match="batches= or lookups=, not both"):
        generate("tiny", batches=1, lookups=10)


def test_progress_bar(capsys):
    generate("tiny", batches=1, progress=True)
    assert "synth tiny" in capsys.readouterr().err
