"""A byte-addressed memory model: host memory and device memory in one address space.

Pages of 4 KiB are allocated on first write; bytes never written read as zero. The model is
sparse, so a layout with tables spread over gigabytes costs only the pages a test touches.
"""

import numpy as np

__all__ = ["SparseMemory", "PAGE"]

PAGE = 4096


class SparseMemory:
    """Byte-addressed memory of 64-bit addresses, as seen behind the ``m_axi`` port."""

    def __init__(self):
        self.pages = {}

    def _page(self, n, create):
        p = self.pages.get(n)
        if p is None and create:
            p = self.pages[n] = np.zeros(PAGE, dtype=np.uint8)
        return p

    def read(self, addr, length):
        """``length`` bytes from ``addr`` as a ``uint8`` array (a copy)."""
        out = np.zeros(length, dtype=np.uint8)
        done = 0
        while done < length:
            a = addr + done
            n, off = divmod(a, PAGE)
            k = min(PAGE - off, length - done)
            p = self._page(n, False)
            if p is not None:
                out[done:done + k] = p[off:off + k]
            done += k
        return out

    def write(self, addr, data):
        """Write the bytes ``data`` (anything ``np.frombuffer``/``asarray`` takes) at ``addr``."""
        data = np.asarray(data, dtype=np.uint8).ravel() if not isinstance(data, (bytes, bytearray)) \
            else np.frombuffer(bytes(data), dtype=np.uint8)
        done = 0
        while done < len(data):
            a = addr + done
            n, off = divmod(a, PAGE)
            k = min(PAGE - off, len(data) - done)
            self._page(n, True)[off:off + k] = data[done:done + k]
            done += k

    def copy(self, dst, src, length):
        self.write(dst, self.read(src, length))

    def add_words(self, addr, length, delta):
        """Add ``delta`` to each little-endian ``uint32`` word of ``[addr, addr+length)``
        (wrapping): the modelled GPU/CPU update of an embedding row."""
        row = self.read(addr, length).view("<u4")
        row += np.uint32(delta & 0xFFFFFFFF)
        self.write(addr, row.view(np.uint8))

    def snapshot(self):
        """``{page address: bytes}`` of every page that is not all zero."""
        return {n * PAGE: p.tobytes() for n, p in sorted(self.pages.items()) if p.any()}

    def __eq__(self, other):
        return isinstance(other, SparseMemory) and self.snapshot() == other.snapshot()

    def diff(self, other, limit=8):
        """Addresses of the first ``limit`` bytes that differ, for assertion messages."""
        out = []
        for n in sorted(set(self.pages) | set(other.pages)):
            a = self.read(n * PAGE, PAGE)
            b = other.read(n * PAGE, PAGE)
            for off in np.flatnonzero(a != b)[:limit - len(out)]:
                out.append((n * PAGE + int(off), int(a[off]), int(b[off])))
            if len(out) >= limit:
                break
        return out
