"""golden.criteo: DLRM's hashing of Criteo TSV files, both modes, gzip, errors."""

import gzip

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from golden import criteo
from golden.criteo import read_criteo_tsv
from golden.trace import TraceError

DENSE = ["1", "", "5", "0", "1382", "4", "15", "2", "181", "1", "2", "", "2"]


def line(cats, label="0", dense=DENSE):
    return "\t".join([label, *dense, *cats]) + "\n"


def cats_with(first, fifth="2c16a946"):
    """26 categorical values: C1 and C5 given, the others fixed (C3 empty)."""
    cats = [f"{j:08x}" for j in range(26)]
    cats[0], cats[2], cats[4] = first, "", fifth
    return cats


# C1 over the sample: two distinct values, an empty one, "00000000" (= empty), upper case
C1 = ["68fd1e64", "05db9164", "68fd1e64", "", "00000000", "ABCDEF01"]
SAMPLE = "".join(line(cats_with(c)) for c in C1)


@pytest.fixture
def sample(tmp_path):
    path = tmp_path / "sample.tsv"
    path.write_text(SAMPLE)
    return path


def c1(trace):
    return trace.rows[trace.tables == 0].tolist()


def test_mod_mode(sample):
    tr = read_criteo_tsv(sample, mode="mod", max_ind_range=1000, batch_size=4)
    # 0x68fd1e64 = 1761418852, 0x05db9164 = 98275684, 0xabcdef01 = 2882400001
    assert c1(tr) == [852, 684, 852, 0, 0, 1]
    assert tr.rows[tr.tables == 2].tolist() == [0] * 6          # C3 always empty
    assert tr.rows[tr.tables == 1].tolist() == [1] * 6          # "00000001"
    assert tr.cardinalities == (1000,) * 26
    assert tr.name == "criteo" and tr.n_lookups == 6 * 26
    assert tr.sample_lengths.tolist() == [26] * 6
    assert tr.batch_sizes.tolist() == [4, 2]                    # partial batch kept
    assert (tr.tables.reshape(6, 26) == np.arange(26)).all()
    assert tr.meta == {"generator": "golden.criteo", "source": str(sample), "mode": "mod",
                       "max_ind_range": 1000}


def test_dict_mode(sample):
    tr = read_criteo_tsv(sample)
    # first appearance order; empty and "00000000" are both value 0
    assert c1(tr) == [0, 1, 0, 2, 2, 3]
    assert tr.cardinalities[:3] == (4, 1, 1)
    assert tr.rows.max() < max(tr.cardinalities)
    assert tr.meta["mode"] == "dict" and tr.meta["max_ind_range"] is None
    assert tr.batch_sizes.tolist() == [6]


def test_dict_mode_after_modulus(sample):
    # DLRM with --max-ind-range: reduce, then number: 852, 684, 852, 0, 0, 1
    tr = read_criteo_tsv(sample, mode="dict", max_ind_range=1000)
    assert c1(tr) == [0, 1, 0, 2, 2, 3]
    tr = read_criteo_tsv(sample, mode="dict", max_ind_range=2)  # 0, 0, 0, 0, 0, 1
    assert c1(tr) == [0, 0, 0, 0, 0, 1] and tr.cardinalities[0] == 2


def test_gzip_is_transparent(sample, tmp_path):
    packed = tmp_path / "day_0"  # recognised by content, not name
    packed.write_bytes(gzip.compress(SAMPLE.encode()))
    a = read_criteo_tsv(sample, mode="mod", max_ind_range=977)
    b = read_criteo_tsv(packed, mode="mod", max_ind_range=977)
    assert (a.rows == b.rows).all() and (a.tables == b.tables).all()


def test_last_line_without_newline_and_max_samples(tmp_path):
    path = tmp_path / "x.tsv"
    path.write_text(SAMPLE.rstrip("\n"))
    assert read_criteo_tsv(path).n_samples == 6
    path.write_text(SAMPLE[:-1] + "\tbroken\n")  # line 6 has 41 fields
    tr = read_criteo_tsv(path, max_samples=5)
    assert tr.n_samples == 5 and c1(tr) == [0, 1, 0, 2, 2]


def test_short_and_long_values(tmp_path):
    path = tmp_path / "x.tsv"
    path.write_text("".join(line(cats_with(c)) for c in
                            ["a", "fffffffffffffffe", "123456789", "100000001", "1"]))
    tr = read_criteo_tsv(path, mode="mod", max_ind_range=2**40)
    assert c1(tr) == [10, (2**64 - 2) % 2**40, 0x123456789, 0x100000001, 1]
    assert tr.rows.dtype == np.uint64
    assert c1(read_criteo_tsv(path)) == [0, 1, 2, 3, 4]  # 0x100000001 is not 1


@pytest.mark.parametrize("block", [50, 333, 1 << 20])
def test_blocks_do_not_matter(sample, monkeypatch, block):
    monkeypatch.setattr(criteo, "_BLOCK", block)
    tr = read_criteo_tsv(sample, mode="mod", max_ind_range=1000)
    assert c1(tr) == [852, 684, 852, 0, 0, 1]


def reference(lines, modulus):
    """DLRM's data_utils.py, line by line: int(x or "0", 16) % R, then first-seen ids."""
    values = [[int(x or "0", 16) % (modulus or 2**64) for x in cats] for cats in lines]
    ids = [{} for _ in range(26)]
    rows = [[ids[j].setdefault(v, len(ids[j])) for j, v in enumerate(vs)] for vs in values]
    return values, rows, tuple(len(d) for d in ids)


hex_value = st.text("0123456789abcdefABCDEF", max_size=16)


@settings(max_examples=40, deadline=None)
@given(lines=st.lists(st.lists(hex_value, min_size=26, max_size=26), min_size=1, max_size=12),
       modulus=st.one_of(st.none(), st.integers(1, 2**40)), block=st.integers(40, 3000))
def test_matches_dlrm_reference(tmp_path_factory, lines, modulus, block):
    path = tmp_path_factory.mktemp("ref") / "x.tsv"
    path.write_text("".join(line(c) for c in lines))
    values, rows, cards = reference(lines, modulus)
    criteo_block, criteo._BLOCK = criteo._BLOCK, block
    try:
        tr = read_criteo_tsv(path, max_ind_range=modulus)
        assert tr.rows.tolist() == [r for rs in rows for r in rs] and tr.cardinalities == cards
        if modulus:
            tr = read_criteo_tsv(path, mode="mod", max_ind_range=modulus)
            assert tr.rows.tolist() == [v for vs in values for v in vs]
    finally:
        criteo._BLOCK = criteo_block


# --- errors ------------------------------------------------------------------------------

def write(tmp_path, text, name="bad.tsv"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("block", [64, 1 << 20])
def test_wrong_field_count_gives_line(tmp_path, monkeypatch, block):
    monkeypatch.setattr(criteo, "_BLOCK", block)
    short = line(cats_with("1")[:-1])
    path = write(tmp_path, SAMPLE + short + SAMPLE)
    with pytest.raises(TraceError, match=r"bad\.tsv:7: 39 tab-separated fields, expected 40$"):
        read_criteo_tsv(path)


def test_blank_line(tmp_path):
    with pytest.raises(TraceError, match=r"bad\.tsv:3: 1 tab-separated fields"):
        read_criteo_tsv(write(tmp_path, SAMPLE[:2 * len(line(cats_with(C1[0])))] + "\n" + SAMPLE))


@pytest.mark.parametrize("value", ["68fd1e6g", "0x12", "-1", "12 4", "\u00e9"])
def test_non_hex_gives_line_and_feature(tmp_path, value):
    path = write(tmp_path, line(cats_with("1")) + line(cats_with("1", fifth=value)))
    with pytest.raises(TraceError) as info:
        read_criteo_tsv(path, mode="mod", max_ind_range=10)
    message = str(info.value)
    assert message.startswith(f"{path}:2: feature C5 (field 19) ")
    assert message.endswith("is not hexadecimal") and "\n" not in message


def test_too_many_digits(tmp_path):
    path = write(tmp_path, line(cats_with("1" * 17)))
    with pytest.raises(TraceError, match=r"bad\.tsv:1: feature C1 .* more than 16 hex digits"):
        read_criteo_tsv(path)


def test_missing_empty_and_broken_files(tmp_path):
    with pytest.raises(TraceError, match=r"nope\.tsv: cannot read \(No such file"):
        read_criteo_tsv(tmp_path / "nope.tsv")
    with pytest.raises(TraceError, match=r"bad\.tsv: no samples"):
        read_criteo_tsv(write(tmp_path, ""))
    broken = tmp_path / "broken.gz"
    broken.write_bytes(gzip.compress(SAMPLE.encode())[:-20])
    with pytest.raises(TraceError, match=r"broken\.gz: cannot read"):
        read_criteo_tsv(broken)


@pytest.mark.parametrize("kwargs, text", [
    ({"mode": "hash"}, "mode='hash'"),
    ({"mode": "mod"}, "mode='mod' needs max_ind_range"),
    ({"max_ind_range": 0}, "max_ind_range=0"),
    ({"batch_size": 0}, "batch_size=0"),
    ({"max_samples": -1}, "max_samples=-1"),
])
def test_parameter_errors(sample, kwargs, text):
    with pytest.raises(TraceError, match=f"^read_criteo_tsv: {text}"):
        read_criteo_tsv(sample, **kwargs)


def test_progress_bar(sample, capsys):
    read_criteo_tsv(sample, progress=True)
    assert "criteo" in capsys.readouterr().err
