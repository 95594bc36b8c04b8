"""Traces from Criteo's click logs (Kaggle ``train.txt``, Terabyte ``day_N``).

Each line is one sample: a label, 13 integer features ``I1..I13`` and 26 categorical
features ``C1..C26`` written as hexadecimal strings (usually 8 digits), all tab-separated;
any field may be empty. Only the categorical features matter here: feature ``Cj`` is a
lookup of table ``j - 1``, so every sample holds 26 one-hot lookups, table 0 first.

Categories become rows as in DLRM's preprocessing (facebookresearch/dlrm,
``data_utils.py``): an empty value counts as ``"0"``, a value is ``int(hex, 16)``, reduced
``% max_ind_range`` when that is given (``--max-ind-range``), and then

* ``mode="dict"`` (DLRM's way, with or without ``max_ind_range``): each column's values
  are numbered 0, 1, 2, ... in order of first appearance; a table's cardinality is its
  number of distinct values. DLRM builds these dictionaries in a pass of their own; here
  the values are held in memory (4 bytes each, the size of the trace's rows) and numbered
  after reading, one sort per column;
* ``mode="mod"``: the reduced value is the row itself, and every table has
  ``max_ind_range`` rows (the hashing trick: one pass, no dictionary).

Parsing is vectorised: the file is read in 1 MiB blocks, field boundaries are found with
NumPy on the raw bytes, digits are decoded by ``bytes.translate`` and packed eight at a
time in uint64 arithmetic, so neither the Python ``str`` machinery nor ``int(x, 16)`` runs
per field. Label and integer features are not parsed. ``.gz`` files are read transparently
(recognised by their magic bytes, not their name).
"""

import gzip
import numbers
import os
import zlib

import numpy as np
from tqdm import tqdm

from golden.trace import Trace, TraceError

__all__ = ["read_criteo_tsv", "NUM_FIELDS", "NUM_TABLES"]

NUM_FIELDS = 40
NUM_TABLES = 26
_FIRST_CAT = NUM_FIELDS - NUM_TABLES
_BLOCK = 1 << 20
_MAX_DIGITS = 16  # a value must fit uint64

_HEX = bytes(int(chr(c), 16) if chr(c) in "0123456789abcdefABCDEF" else 255
             for c in range(256))  # bytes.translate table: byte -> digit value or 255
_NOT_DIGIT = np.uint64(0x8080808080808080)  # bits set in a byte that is not a digit
_LO_BYTES = np.uint64(0x00FF00FF00FF00FF)
_LO_PAIRS = np.uint64(0x0000FFFF0000FFFF)
_LO_HALF = np.uint64(0xFFFFFFFF)
_KEEP = np.array([(1 << 8 * k) - 1 for k in range(9)], dtype=np.uint64)  # the first k bytes


def _digits(block):
    """Each byte's hexadecimal digit value (255 for a byte that is not a digit), padded
    with at least 16 bytes of 255 to a whole number of uint64 words."""
    padding = b"\xff" * (-len(block) % 8 + _MAX_DIGITS)
    return np.frombuffer((block + padding).translate(_HEX), dtype=np.uint8)


def _hex_values(digits, starts, lengths):
    """Values of the hexadecimal fields ``digits[starts:starts + lengths]`` (uint64) and a
    mask of the fields holding a byte that is not a digit; ``digits`` comes from
    :func:`_digits`.

    Eight digits at a time are fetched as one little-endian uint64 (two aligned words,
    shifted together) and packed SWAR-style in three shift-and-or steps, instead of one
    NumPy pass per digit. In-place operations: temporaries cost as much as the work."""
    u64 = np.uint64
    words = digits.view("<u8")
    values = np.zeros(starts.shape, dtype=u64)
    bad = np.zeros(starts.shape, dtype=bool)
    at = starts.astype(u64)
    for word in range(-(-int(lengths.max()) // 8)):
        first = (at >> u64(3)).astype(np.intp)
        offset = (at & u64(7)) << u64(3)
        x = words[first]
        x >>= offset
        y = words[first + 1]
        y <<= u64(1)
        y <<= u64(63) - offset  # together: << (64 - offset), and 0 at offset 0
        x |= y
        count = np.clip(lengths - 8 * word, 0, 8)
        x &= _KEEP[count]
        bad |= (x & _NOT_DIGIT) != 0
        for mask, bits in ((_LO_BYTES, 4), (_LO_PAIRS, 8), (_LO_HALF, 16)):
            y = x & mask
            y <<= u64(bits)
            x >>= u64(2 * bits)
            x &= mask
            x |= y
        shift = (count << 2).astype(u64)
        values <<= shift
        x >>= u64(32) - shift
        values |= x
        at += u64(8)
    return values, bad


def _categories(path, block, first_line, limit):
    """The categorical values of the first ``limit`` (None: all) lines of ``block`` (whole
    lines), as a ``(lines, 26)`` uint64 array. ``first_line`` counts the lines before it."""
    buf = np.frombuffer(block, dtype=np.uint8)
    newlines = np.flatnonzero(buf == 10)[:limit]
    block = block[:newlines[-1] + 1]
    buf = buf[:len(block)]
    seps = np.flatnonzero((buf == 9) | (buf == 10))
    fields = np.diff(np.searchsorted(seps, newlines), prepend=-1)
    wrong = np.flatnonzero(fields != NUM_FIELDS)
    if wrong.size:
        i = wrong[0]
        raise TraceError(f"{path}:{first_line + i + 1}: {fields[i]} tab-separated fields, "
                         f"expected {NUM_FIELDS}")
    seps = seps.reshape(-1, NUM_FIELDS)
    starts = seps[:, _FIRST_CAT - 1:-1] + 1
    lengths = seps[:, _FIRST_CAT:] - starts

    def complain(where, why):
        line, col = np.unravel_index(np.flatnonzero(where)[0], where.shape)
        text = bytes(block[starts[line, col]:starts[line, col] + lengths[line, col]])
        return TraceError(f"{path}:{first_line + line + 1}: feature C{col + 1} "
                          f"(field {_FIRST_CAT + col + 1}) {text!r} {why}")

    if lengths.max() > _MAX_DIGITS:
        raise complain(lengths > _MAX_DIGITS, f"has more than {_MAX_DIGITS} hex digits")
    values, bad = _hex_values(_digits(block), starts, lengths)
    if bad.any():
        raise complain(bad, "is not hexadecimal")
    return values


def _first_seen(column):
    """Ids (uint32) numbering the distinct values of ``column`` 0, 1, 2, ... in order of
    first appearance, and how many there are.

    One ``np.sort`` of ``value << 32 | position`` does it (several times faster than
    ``np.unique(..., return_index=True, return_inverse=True)``, which argsorts); values that
    need more than 32 bits are first replaced by dense codes, a bijection that leaves first
    appearances where they were."""
    u64 = np.uint64
    if column.max() >= 2**32:
        column = np.unique(column, return_inverse=True)[1]
    n = len(column)
    keys = (column.astype(u64) << u64(32)) | np.arange(n, dtype=u64)
    keys.sort()
    where = (keys & u64(0xFFFFFFFF)).astype(np.intp)
    keys >>= u64(32)
    new = np.empty(n, dtype=bool)  # the first (earliest) position of each value
    new[0] = True
    np.not_equal(keys[1:], keys[:-1], out=new[1:])
    first = where[new]
    appeared = np.zeros(n, dtype=bool)
    appeared[first] = True
    rank = (np.cumsum(appeared) - 1)[first]  # order of first appearance, per value
    ids = np.empty(n, dtype=np.uint32)
    ids[where] = rank[np.cumsum(new) - 1]
    return ids, len(first)


def _positive(name, value, optional=False):
    if optional and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise TraceError(f"read_criteo_tsv: {name}={value!r}: must be a positive integer")
    return int(value)


def read_criteo_tsv(path, *, mode="dict", max_ind_range=None, batch_size=1024,
                    max_samples=None, progress=False):
    """A trace of the categorical lookups of a Criteo TSV file, one sample per line.

    Parameters
    ----------
    path : str or os.PathLike
        A Criteo Kaggle or Terabyte text file, plain or gzip-compressed.
    mode : {"dict", "mod"}
        How values become rows (see the module docstring): ``"dict"`` numbers each column's
        distinct values by first appearance (DLRM's preprocessing), ``"mod"`` uses
        ``value % max_ind_range`` as the row.
    max_ind_range : int, optional
        DLRM's ``--max-ind-range``: values are reduced modulo it first. Required by ``"mod"``.
    batch_size : int
        Samples per mini-batch: consecutive lines; a final partial mini-batch is kept.
    max_samples : int, optional
        Read at most this many lines.
    progress : bool
        Show a tqdm progress bar over the bytes of the file.

    Returns
    -------
    Trace
        Named ``criteo``; 26 lookups per sample; ``meta`` records ``source``, ``mode`` and
        ``max_ind_range``. Cardinalities are the distinct values per column (``"dict"``) or
        ``max_ind_range`` for every table (``"mod"``).

    Raises
    ------
    TraceError
        If the file cannot be read, holds no sample, or a line has the wrong number of fields
        or a categorical value that is not hexadecimal (the message gives file and line), or
        a parameter is out of range.
    """
    if mode not in ("dict", "mod"):
        raise TraceError(f"read_criteo_tsv: mode={mode!r}: must be 'dict' or 'mod'")
    modulus = _positive("max_ind_range", max_ind_range, optional=True)
    if mode == "mod" and modulus is None:
        raise TraceError("read_criteo_tsv: mode='mod' needs max_ind_range")
    batch_size = _positive("batch_size", batch_size)
    max_samples = _positive("max_samples", max_samples, optional=True)
    path = os.fspath(path)

    blocks, lines, tail = [], 0, b""
    try:
        with open(path, "rb") as raw, \
                tqdm(total=os.fstat(raw.fileno()).st_size, unit="B", unit_scale=True,
                     desc="criteo", disable=not progress) as bar:
            stream = gzip.GzipFile(fileobj=raw) if raw.peek(2)[:2] == b"\x1f\x8b" else raw
            while max_samples is None or lines < max_samples:
                data = stream.read(_BLOCK)
                block = tail + data if data else tail + b"\n" if tail else b""
                if not block:
                    break
                cut = block.rfind(b"\n") + 1
                block, tail = block[:cut], block[cut:]
                if block:
                    values = _categories(path, block, lines,
                                         None if max_samples is None else max_samples - lines)
                    if modulus is not None:
                        values %= np.uint64(modulus)
                    blocks.append(values.astype(np.uint32) if values.max() < 2**32 else values)
                    lines += len(values)
                bar.update(raw.tell() - bar.n)
    except (OSError, EOFError, zlib.error) as e:
        raise TraceError(f"{path}: cannot read ({getattr(e, 'strerror', None) or e})") from None
    if not lines:
        raise TraceError(f"{path}: no samples")

    values = np.concatenate(blocks)
    if mode == "mod":
        cardinalities = (modulus,) * NUM_TABLES
    else:
        rows = values if values.dtype == np.uint32 else np.empty(values.shape, np.uint32)
        cardinalities = []
        for j in range(NUM_TABLES):
            rows[:, j], count = _first_seen(values[:, j].copy())
            cardinalities.append(count)
        values = rows
    full, rest = divmod(lines, batch_size)
    return Trace(np.tile(np.arange(NUM_TABLES, dtype=np.uint8), lines), values.ravel(),
                 np.full(lines, NUM_TABLES, dtype=np.uint32),
                 np.array([batch_size] * full + ([rest] if rest else []), dtype=np.uint32),
                 cardinalities, "criteo",
                 {"generator": "golden.criteo", "source": path, "mode": mode,
                  "max_ind_range": modulus})
