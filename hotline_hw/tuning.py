"""Process tuning for the NumPy-heavy golden model.

glibc returns large freed blocks (NumPy temporaries of tens of megabytes) to the kernel
and faults fresh pages in on the next allocation. Where page faults are expensive, as in the
sandboxed VMs this project is developed and tested on (about 10 us per 4 KiB page, measured:
a first 80 MB ``astype`` takes 0.28 s, a repeated one 0.01 s), that dominates the golden
model's run time. :func:`keep_freed_memory` stops glibc from serving large blocks by mmap and raises its trim
threshold, so freed memory stays in the heap and is reused. It changes no result, only speed, and does nothing
where glibc's ``mallopt`` is not available.
"""

import ctypes
import ctypes.util

__all__ = ["keep_freed_memory"]

_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
_M_MMAP_MAX = -4

_done = False


def keep_freed_memory():
    """Keep freed heap memory for reuse (glibc only; idempotent). Returns True if applied."""
    global _done
    if _done:
        return True
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    ok = mallopt(_M_MMAP_MAX, 0) == 1          # large blocks from the heap, not mmap
    ok &= mallopt(_M_TRIM_THRESHOLD, 2**31 - 1) == 1
    ok &= mallopt(_M_TOP_PAD, 256 << 20) == 1
    _done = bool(ok)
    return _done
