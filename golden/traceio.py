"""The compact on-disk trace format (``.hltrace``).

Layout (all integers little-endian)::

    offset        size  content
    0             8     magic b"HLTRACE\\x01" (the last byte is the format version)
    8             4     uint32 H: header length in bytes
    12            H     UTF-8 JSON header, padded with spaces so the arrays start 8-aligned
    12 + H        ...   the arrays tables, rows, sample_lengths, batch_sizes, in this order,
                        each zero-padded to a multiple of 8 bytes
    end - 12      8     footer magic b"HLTREND\\x01"
    end - 4       4     uint32 CRC-32 (zlib) of every byte before the footer

The header holds ``name``, ``cardinalities``, ``meta`` and ``arrays``, which maps each array
name to ``{"dtype": "<u4", "count": n}``; when every sample has the same length (one-hot and
fixed multi-hot traces) ``sample_lengths`` is ``{"constant": k, "count": n}`` and takes no
space. Tables are ``<u1``/``<u2``, rows ``<u4``/``<u8``, the others ``<u4``.

Loading reads the file once, checks its size and CRC, and views the arrays in place
(``np.frombuffer``), so a 10M-lookup trace loads in a few tens of milliseconds.
"""

import json
import os
import zlib

import numpy as np

from golden.trace import Trace, TraceError

__all__ = ["MAGIC", "FOOTER_MAGIC", "save_trace", "load_trace", "trace_info"]

MAGIC = b"HLTRACE\x01"
FOOTER_MAGIC = b"HLTREND\x01"
_PREFIX = len(MAGIC) + 4
_FOOTER = len(FOOTER_MAGIC) + 4
_ARRAYS = {  # stored order and the dtypes each array may have
    "tables": ("<u1", "<u2"),
    "rows": ("<u4", "<u8"),
    "sample_lengths": ("<u4",),
    "batch_sizes": ("<u4",),
}
_CRITEO_HINT = "convert a Criteo TSV with `hotline-hw trace --criteo`"


def _padded(n):
    return -(-n // 8) * 8


def _storable(name, arr):
    """``arr`` in the first allowed dtype of ``name`` that holds it (its own if allowed),
    and that dtype's header string."""
    for d in _ARRAYS[name]:
        if arr.dtype.newbyteorder("<") == np.dtype(d):
            return arr.astype(d, copy=False), d
    if arr.dtype.kind not in "iu" or (arr.size and arr.min() < 0):
        raise TraceError(f"save_trace: {name} must hold non-negative integers (dtype {arr.dtype})")
    top = int(arr.max()) if arr.size else 0
    for d in _ARRAYS[name]:
        if top <= np.iinfo(d).max:
            return arr.astype(d), d
    raise TraceError(f"save_trace: {name} value {top} does not fit {_ARRAYS[name][-1]}")


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(f"{type(value).__name__} {value!r}")


def save_trace(trace, path):
    """Write ``trace`` to ``path`` in the ``.hltrace`` format.

    The file is written beside ``path`` and renamed into place, so ``path`` never holds a
    partial trace.

    Parameters
    ----------
    trace : Trace
        The trace; its ``meta`` must be JSON-serialisable (NumPy scalars and paths are
        converted; tuples come back as lists).
    path : str or os.PathLike
        Output file, conventionally ``*.hltrace``.

    Raises
    ------
    TraceError
        If ``meta`` cannot be written as JSON, an array cannot be stored, or the file cannot
        be written.
    """
    arrays, spec = {}, {}
    for name in _ARRAYS:
        arrays[name], dtype = _storable(name, np.ascontiguousarray(getattr(trace, name)))
        spec[name] = {"dtype": dtype, "count": len(arrays[name])}
    lengths = arrays["sample_lengths"]
    if len(lengths) and (lengths == lengths[0]).all():
        spec["sample_lengths"] = {"constant": int(lengths[0]), "count": len(lengths)}
        del arrays["sample_lengths"]
    header = {"name": trace.name, "cardinalities": list(trace.cardinalities),
              "meta": trace.meta, "arrays": spec}
    try:
        text = json.dumps(header, default=_json_default, separators=(",", ":")).encode()
    except (TypeError, ValueError) as e:
        raise TraceError(f"save_trace: trace meta is not JSON-serialisable ({e})") from None
    text += b" " * (_padded(_PREFIX + len(text)) - _PREFIX - len(text))

    path = os.fspath(path)
    part = path + ".part"
    pieces = [MAGIC, len(text).to_bytes(4, "little"), text]
    for a in arrays.values():
        pieces += [a.data, bytes(_padded(a.nbytes) - a.nbytes)]
    try:
        with open(part, "wb") as f:
            crc = 0
            for piece in pieces:
                f.write(piece)
                crc = zlib.crc32(piece, crc)
            f.write(FOOTER_MAGIC + crc.to_bytes(4, "little"))
        os.replace(part, path)
    except OSError as e:
        if os.path.exists(part):
            os.remove(part)
        raise TraceError(f"{path}: cannot write ({e.strerror})") from None


def _not_a_trace(path, head):
    if not head:
        return f"{path}: not a trace but an empty file"
    if head[:2] == b"\x1f\x8b":
        return f"{path}: not a trace but a gzip file; {_CRITEO_HINT}"
    if b"\t" in head and b"\0" not in head:
        return f"{path}: not a trace but tab-separated text; {_CRITEO_HINT}"
    return f"{path}: not a trace (starts with {bytes(head[:8])!r}, expected {MAGIC!r})"


def _is_int(value, low=0, high=None):
    return (isinstance(value, int) and not isinstance(value, bool) and value >= low
            and (high is None or value <= high))


def _parse_header(path, text):
    """Decode and check the header; return it, the offset of each stored array from the
    first one, and the bytes of all arrays."""
    def invalid(why):
        return TraceError(f"{path}: the header does not parse ({why})")

    try:
        header = json.loads(bytes(text).decode())
    except (UnicodeDecodeError, ValueError) as e:
        raise invalid(e) from None
    if not isinstance(header, dict) or \
            not {"name", "cardinalities", "meta", "arrays"} <= header.keys():
        raise invalid("missing name, cardinalities, meta or arrays")
    if not isinstance(header["name"], str) or not isinstance(header["meta"], dict):
        raise invalid("name must be a string and meta an object")
    if not isinstance(header["cardinalities"], list) or \
            not all(_is_int(c) for c in header["cardinalities"]):
        raise invalid("cardinalities must be a list of non-negative integers")
    spec = header["arrays"]
    if not isinstance(spec, dict) or set(spec) != set(_ARRAYS):
        raise invalid(f"arrays must describe exactly {', '.join(_ARRAYS)}")
    offsets, end = {}, 0
    for name, allowed in _ARRAYS.items():
        entry = spec[name]
        if not isinstance(entry, dict) or not _is_int(entry.get("count")):
            raise invalid(f"{name} needs a non-negative integer count")
        if name == "sample_lengths" and "constant" in entry:
            if not _is_int(entry["constant"], 0, 2**32 - 1) or \
                    entry["constant"] * entry["count"] != spec["tables"]["count"]:
                raise invalid("constant sample length does not match the lookup count")
            continue
        if entry.get("dtype") not in allowed:
            raise invalid(f"{name} dtype {entry.get('dtype')!r} is not one of {', '.join(allowed)}")
        offsets[name] = end
        end += _padded(entry["count"] * np.dtype(entry["dtype"]).itemsize)
    return header, offsets, end


def _layout(path, head, size):
    """Check a file of ``size`` bytes that starts with ``head`` (at least its header, if the
    file holds one): magic, version, header and size. Return the header and the file offset
    of each stored array."""
    if 0 < len(head) < len(MAGIC) and MAGIC.startswith(bytes(head)):
        raise TraceError(f"{path}: truncated: expected at least {_PREFIX + _FOOTER} bytes, "
                         f"found {size}")
    if bytes(head[:len(MAGIC) - 1]) != MAGIC[:-1]:
        raise TraceError(_not_a_trace(path, head[:4096]))
    if head[len(MAGIC) - 1] != MAGIC[-1]:
        raise TraceError(f"{path}: unsupported trace format version {head[len(MAGIC) - 1]} "
                         f"(this reader knows version {MAGIC[-1]})")
    if size < _PREFIX + _FOOTER:
        raise TraceError(f"{path}: truncated: expected at least {_PREFIX + _FOOTER} bytes, "
                         f"found {size}")
    length = int.from_bytes(head[len(MAGIC):_PREFIX], "little")
    if size < _PREFIX + length + _FOOTER:
        raise TraceError(f"{path}: truncated: expected at least {_PREFIX + length + _FOOTER} "
                         f"bytes, found {size}")
    header, offsets, data_bytes = _parse_header(path, head[_PREFIX:_PREFIX + length])
    expected = _PREFIX + length + data_bytes + _FOOTER
    if size != expected:
        what = "truncated" if size < expected else "corrupt"
        raise TraceError(f"{path}: {what}: expected {expected} bytes, found {size}")
    return header, {name: _PREFIX + length + off for name, off in offsets.items()}


def _crc_error(path, buf):
    """The complaint about ``buf`` if it ends in a footer whose CRC does not match, else None."""
    footer = bytes(buf[-_FOOTER:])
    if len(buf) < _PREFIX + _FOOTER or footer[:len(FOOTER_MAGIC)] != FOOTER_MAGIC:
        return None
    want = int.from_bytes(footer[len(FOOTER_MAGIC):], "little")
    got = zlib.crc32(memoryview(buf)[:-_FOOTER])
    if want == got:
        return None
    return f"{path}: corrupt: CRC mismatch (stored {want:08x}, computed {got:08x})"


def load_trace(path):
    """Read a trace written by :func:`save_trace`.

    Parameters
    ----------
    path : str or os.PathLike
        An ``.hltrace`` file.

    Returns
    -------
    Trace
        Its arrays are (writable) views of one buffer holding the file.

    Raises
    ------
    TraceError
        With a one-line message naming the file, if it cannot be read, is not a trace (with a
        hint for a Criteo TSV given by mistake), has an unsupported version, is truncated (the
        expected and found sizes), is corrupt (CRC mismatch) or has a header that does not
        parse.
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            buf = bytearray(os.fstat(f.fileno()).st_size)
            f.readinto(buf)
    except OSError as e:
        raise TraceError(f"{path}: cannot read ({e.strerror})") from None
    try:
        header, offsets = _layout(path, buf, len(buf))
        if bytes(buf[-_FOOTER:-4]) != FOOTER_MAGIC:
            raise TraceError(f"{path}: corrupt: no footer where expected")
    except TraceError as e:  # a damaged file whose footer survived: say it is corrupt
        raise TraceError(_crc_error(path, buf) or str(e)) from None
    crc = _crc_error(path, buf)
    if crc:
        raise TraceError(crc)

    spec = header["arrays"]
    arrays = {name: np.frombuffer(buf, dtype=spec[name]["dtype"], count=spec[name]["count"],
                                  offset=off)
              for name, off in offsets.items()}
    if "sample_lengths" not in arrays:
        arrays["sample_lengths"] = np.full(spec["sample_lengths"]["count"],
                                           spec["sample_lengths"]["constant"], dtype=np.uint32)
    try:
        return Trace(cardinalities=header["cardinalities"], name=header["name"],
                     meta=header["meta"], **arrays)
    except TraceError as e:
        raise TraceError(f"{path}: inconsistent: {e}") from None


def trace_info(path):
    """What a trace file holds, read from its header and size only (the CRC is not checked:
    that needs the whole file; :func:`load_trace` does it).

    Parameters
    ----------
    path : str or os.PathLike
        An ``.hltrace`` file.

    Returns
    -------
    dict
        ``name``, ``cardinalities``, ``meta``, the counts ``lookups``, ``samples`` and
        ``batches``, the ``dtypes`` of tables and rows, the format ``version`` and the file
        size in ``bytes``.

    Raises
    ------
    TraceError
        As :func:`load_trace`, except that damage to the arrays or the footer goes unnoticed.
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(4096)
            if head[:len(MAGIC)] == MAGIC and len(head) >= _PREFIX:
                head += f.read(min(size, int.from_bytes(head[len(MAGIC):_PREFIX], "little")))
    except OSError as e:
        raise TraceError(f"{path}: cannot read ({e.strerror})") from None
    header, _ = _layout(path, head, size)
    spec = header["arrays"]
    return {"name": header["name"], "cardinalities": header["cardinalities"],
            "meta": header["meta"], "lookups": spec["tables"]["count"],
            "samples": spec["sample_lengths"]["count"], "batches": spec["batch_sizes"]["count"],
            "dtypes": {"tables": spec["tables"]["dtype"], "rows": spec["rows"]["dtype"]},
            "version": MAGIC[-1], "bytes": size}
