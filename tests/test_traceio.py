"""golden.traceio: the .hltrace format: round trips, layout, and every kind of damage."""

import gzip
import json
import pathlib
import zlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from golden.synth import generate
from golden.trace import Trace, TraceError
from golden.traceio import FOOTER_MAGIC, MAGIC, load_trace, save_trace, trace_info

DATA = pathlib.Path(__file__).parent / "data"


def same(a, b):
    assert a.name == b.name and a.cardinalities == b.cardinalities and a.meta == b.meta
    for name in ("tables", "rows", "sample_lengths", "batch_sizes"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name


@st.composite
def traces(draw):
    num_tables = draw(st.sampled_from([1, 3, 26, 300]))
    lengths = draw(st.lists(st.integers(0, 6), max_size=20))  # multi-hot and empty samples
    cuts = sorted(draw(st.lists(st.integers(0, len(lengths)), max_size=4)))
    batches = np.diff([0, *cuts, len(lengths)]).tolist() if lengths or cuts else []
    n = sum(lengths)
    row_dtype = draw(st.sampled_from([np.uint32, np.uint64]))
    top = np.iinfo(row_dtype).max
    tables = draw(st.lists(st.integers(0, num_tables - 1), min_size=n, max_size=n))
    rows = draw(st.lists(st.integers(0, top), min_size=n, max_size=n))
    meta = draw(st.dictionaries(st.text(max_size=5), st.one_of(
        st.integers(-2**53, 2**53), st.floats(allow_nan=False), st.text(max_size=8),
        st.none(), st.booleans()), max_size=3))
    return Trace(np.array(tables, dtype=np.uint8 if num_tables <= 256 else np.uint16),
                 np.array(rows, dtype=row_dtype), lengths, batches,
                 draw(st.lists(st.integers(0, 2**40), min_size=num_tables, max_size=num_tables)),
                 draw(st.text(max_size=10)), meta)


@settings(max_examples=60, deadline=None)
@given(trace=traces())
def test_round_trip(tmp_path_factory, trace):
    path = tmp_path_factory.mktemp("rt") / "t.hltrace"
    save_trace(trace, path)
    back = load_trace(path)
    same(trace, back)
    info = trace_info(path)
    assert (info["lookups"], info["samples"], info["batches"]) == \
        (trace.n_lookups, trace.n_samples, trace.n_batches)


def test_round_trip_synthetic_and_writable(tmp_path):
    trace = generate("dlrmv2", batches=1, batch_size=3, bad_key_rate=0.1)
    save_trace(trace, tmp_path / "t.hltrace")
    back = load_trace(tmp_path / "t.hltrace")
    same(trace, back)
    back.rows[0] = 1  # arrays are writable views of the file buffer


def header_of(path):
    raw = path.read_bytes()
    length = int.from_bytes(raw[8:12], "little")
    return json.loads(raw[12:12 + length]), 12 + length, raw


def test_layout_is_as_documented(tmp_path):
    trace = Trace(np.array([0, 1, 2, 1], np.uint8), np.array([5, 6, 7, 2**32 - 1], np.uint32),
                  [1, 3], [2], (10, 20, 30), "x", {"k": 1})
    path = tmp_path / "t.hltrace"
    save_trace(trace, path)
    header, start, raw = header_of(path)
    assert raw[:8] == MAGIC and start % 8 == 0
    assert header["arrays"]["rows"] == {"dtype": "<u4", "count": 4}
    assert raw[start:start + 4] == bytes([0, 1, 2, 1]) and raw[start + 4:start + 8] == bytes(4)
    assert np.frombuffer(raw[start + 8:start + 24], "<u4").tolist() == [5, 6, 7, 2**32 - 1]
    assert np.frombuffer(raw[start + 24:start + 32], "<u4").tolist() == [1, 3]
    assert np.frombuffer(raw[start + 32:start + 36], "<u4").tolist() == [2]
    assert len(raw) == start + 40 + 12
    assert raw[-12:-4] == FOOTER_MAGIC
    assert int.from_bytes(raw[-4:], "little") == zlib.crc32(raw[:-12])


def test_one_hot_sample_lengths_take_no_space(tmp_path):
    trace = generate("kaggle", batches=1, batch_size=100)
    save_trace(trace, tmp_path / "t.hltrace")
    header, start, raw = header_of(tmp_path / "t.hltrace")
    assert header["arrays"]["sample_lengths"] == {"constant": 26, "count": 100}
    assert len(raw) == start + 2600 + 4 * 2600 + 8 + 12


def small_trace():
    return Trace(np.array([0, 2, 1, 3, 0], np.uint8), np.array([7, 1023, 0, 5, 999], np.uint32),
                 [2, 0, 3], [1, 2], (1000, 200, 24), "tiny", {"generator": "hand", "seed": 1})


def test_format_is_stable():
    """tests/data/small.hltrace was written by version 1: it must load, and save the same."""
    golden = DATA / "small.hltrace"
    same(load_trace(golden), small_trace())


def test_saving_is_byte_identical(tmp_path):
    save_trace(small_trace(), tmp_path / "s.hltrace")
    assert (tmp_path / "s.hltrace").read_bytes() == (DATA / "small.hltrace").read_bytes()


def test_integer_arrays_are_narrowed_and_meta_converted(tmp_path):
    trace = Trace(np.array([0, 1], np.int64), np.array([3, 4], np.int64), [2], [1], (5, 5),
                  "t", {"seed": np.int64(3), "path": pathlib.Path("a/b")})
    save_trace(trace, tmp_path / "t.hltrace")
    back = load_trace(tmp_path / "t.hltrace")
    assert back.tables.dtype == np.uint8 and back.rows.dtype == np.uint32
    assert back.meta == {"seed": 3, "path": "a/b"}


@pytest.mark.parametrize("trace, text", [
    (Trace([0.5], [1], [1], [1], (2,)), "tables must hold non-negative integers"),
    (Trace(np.array([-1]), np.array([1]), [1], [1], (2,)), "tables must hold non-negative"),
    (Trace(np.array([0]), np.array([2**64 - 1], np.uint64), [1], [1], (2,), meta={"x": object()}),
     "meta is not JSON-serialisable"),
])
def test_save_errors(tmp_path, trace, text):
    with pytest.raises(TraceError, match=text):
        save_trace(trace, tmp_path / "t.hltrace")
    assert not list(tmp_path.iterdir())  # no partial file left


def test_save_to_missing_directory(tmp_path):
    with pytest.raises(TraceError, match=r"cannot write \(No such file"):
        save_trace(small_trace(), tmp_path / "no" / "t.hltrace")


# --- damage --------------------------------------------------------------------------------

@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "t.hltrace"
    save_trace(generate("tiny", batches=3), path)
    return path


def one_line(info, path):
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    return message


def test_truncated_at_every_kind_of_point(saved):
    raw = saved.read_bytes()
    start = header_of(saved)[1]
    for cut in (3, 8, 11, 12, 30, start, start + 5, len(raw) - 13, len(raw) - 12, len(raw) - 1):
        saved.write_bytes(raw[:cut])
        with pytest.raises(TraceError) as info:
            load_trace(saved)
        message = one_line(info, saved)
        assert ": truncated: expected" in message and message.endswith(f"found {cut}"), cut
        with pytest.raises(TraceError, match=": truncated: expected"):
            trace_info(saved)


def test_truncated_message_gives_the_expected_size(saved):
    raw = saved.read_bytes()
    saved.write_bytes(raw[:-100])
    with pytest.raises(TraceError, match=f"expected {len(raw)} bytes, found {len(raw) - 100}$"):
        load_trace(saved)


def test_trailing_data_is_corrupt(saved):
    saved.write_bytes(saved.read_bytes() + b"\0")
    with pytest.raises(TraceError, match=r": corrupt: expected \d+ bytes, found \d+$"):
        load_trace(saved)


def test_flipped_array_byte_is_a_crc_error(saved):
    raw = bytearray(saved.read_bytes())
    raw[header_of(saved)[1] + 10] ^= 0x40
    saved.write_bytes(raw)
    with pytest.raises(TraceError, match=r"corrupt: CRC mismatch \(stored [0-9a-f]{8}, "
                                         r"computed [0-9a-f]{8}\)$"):
        load_trace(saved)
    assert trace_info(saved)["lookups"] == 3 * 16 * 3  # the header alone is still fine


@settings(max_examples=80, deadline=None)
@given(where=st.floats(0, 1, exclude_max=True), bit=st.integers(0, 7))
def test_any_flipped_bit_is_reported(tmp_path_factory, where, bit):
    path = tmp_path_factory.mktemp("flip") / "t.hltrace"
    save_trace(generate("tiny", batches=2, bad_key_rate=0.1), path)
    raw = bytearray(path.read_bytes())
    at = int(where * len(raw))
    raw[at] ^= 1 << bit
    path.write_bytes(raw)
    with pytest.raises(TraceError) as info:
        load_trace(path)
    message = one_line(info, path)
    if at >= 12 and at < len(raw) - 12:
        assert ": corrupt: " in message


def assemble(header, data=b"", magic=MAGIC):
    body = magic + len(header).to_bytes(4, "little") + header + data
    return body + FOOTER_MAGIC + zlib.crc32(body).to_bytes(4, "little")


def test_unsupported_version(saved):
    raw = saved.read_bytes()
    saved.write_bytes(assemble(raw[12:-12], magic=MAGIC[:-1] + b"\x02"))
    with pytest.raises(TraceError) as info:
        load_trace(saved)
    assert one_line(info, saved).endswith("unsupported trace format version 2 "
                                          "(this reader knows version 1)")


@pytest.mark.parametrize("header, text", [
    (b"{not json", "the header does not parse"),
    (b"\xff\xfe", "the header does not parse"),
    (b"[]", "missing name"),
    (b'{"name":"x","cardinalities":[1],"meta":{},"arrays":{}}', "arrays must describe"),
    (b'{"name":"x","cardinalities":[-1],"meta":{},"arrays":{}}', "cardinalities must be"),
], ids=["garbage", "utf16", "list", "arrays", "cardinalities"])
def test_header_that_does_not_parse(tmp_path, header, text):
    path = tmp_path / "t.hltrace"
    path.write_bytes(assemble(header))
    with pytest.raises(TraceError, match=text):
        load_trace(path)
    with pytest.raises(TraceError, match=text):
        trace_info(path)


def test_bad_array_spec(saved):
    header, start, raw = header_of(saved)
    header["arrays"]["rows"]["dtype"] = "<f8"
    saved.write_bytes(assemble(json.dumps(header).encode(), raw[start:-12]))
    with pytest.raises(TraceError, match=r"rows dtype '<f8' is not one of <u4, <u8"):
        load_trace(saved)


def test_inconsistent_counts(saved):
    header, start, raw = header_of(saved)
    header["arrays"]["batch_sizes"]["count"] = 2  # 3 batches of 16 written, 2 declared
    data = raw[start:-12]
    saved.write_bytes(assemble(json.dumps(header).encode(), data[:-8]))
    with pytest.raises(TraceError, match="inconsistent: .*mini-batch sizes sum to 32"):
        load_trace(saved)


TSV = "0\t1\t\t5" + "\t68fd1e64" * 26 + "\n"


@pytest.mark.parametrize("content, text", [
    (TSV.encode(), "not a trace but tab-separated text; convert a Criteo TSV with "
                   "`hotline-hw trace --criteo`"),
    (gzip.compress(TSV.encode(), mtime=0), "not a trace but a gzip file; convert a Criteo TSV with "
                                  "`hotline-hw trace --criteo`"),
    (b"hello, world\n", "not a trace (starts with b'hello, w', expected b'HLTRACE\\x01')"),
    (b"", "not a trace but an empty file"),
], ids=["tsv", "gzip", "text", "empty"])
def test_not_a_trace(tmp_path, content, text):
    path = tmp_path / "train.txt"
    path.write_bytes(content)
    for read in (load_trace, trace_info):
        with pytest.raises(TraceError) as info:
            read(path)
        assert one_line(info, path) == f"{path}: {text}"


def test_missing_file(tmp_path):
    for read in (load_trace, trace_info):
        with pytest.raises(TraceError, match=r"nope\.hltrace: cannot read \(No such file"):
            read(tmp_path / "nope.hltrace")


def test_trace_info(saved):
    info = trace_info(saved)
    assert info["name"] == "tiny" and info["cardinalities"] == [1000, 200, 24]
    assert (info["lookups"], info["samples"], info["batches"]) == (144, 48, 3)
    assert info["dtypes"] == {"tables": "<u1", "rows": "<u4"}
    assert info["version"] == 1 and info["bytes"] == saved.stat().st_size
    assert info["meta"]["generator"] == "golden.synth"
