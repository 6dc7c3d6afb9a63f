"""glibc's allocator, tuned for a long-running process that handles tensors of ever-different sizes.

Forward passes and tokenisers allocate through ``malloc`` from several threads. Two glibc habits
make such a process hold memory it no longer uses:

* freed blocks below one still in use stay resident (only the heap's top is trimmed):
  :func:`trim_heap` (``malloc_trim(0)``) returns the free pages of every arena;
* after freeing a large mmapped block glibc raises its mmap threshold (up to 32 MiB), so later
  large buffers (a batch's hidden states: hundreds of KB per sequence) come from the heap, where
  each batch's differently sized buffers leave holes the next one cannot reuse. An ingest grew by
  ~110 KB per chunk from this alone. :func:`fix_mmap_threshold` pins the threshold, so large
  buffers are mapped and unmapped whole and go back to the system when freed.

Elsewhere than glibc (musl, macOS) both do nothing and say so by returning ``False``.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from typing import Any

logger = logging.getLogger(__name__)

_M_MMAP_THRESHOLD = -3  # mallopt parameter (malloc.h)
#: Blocks from this size up are mapped on their own (glibc's starting value, kept fixed).
MMAP_THRESHOLD_BYTES = 128 * 1024
#: glibc's own variable for the threshold; when the user set it, their choice stands.
MMAP_THRESHOLD_ENV = "MALLOC_MMAP_THRESHOLD_"


def _glibc() -> Any | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)  # the C library this process already runs on
        trim, mallopt = libc.malloc_trim, libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return libc


_LIBC = _glibc()


def heap_tunable() -> bool:
    """This process runs on glibc, whose heap these functions adjust."""
    return _LIBC is not None


def trim_heap() -> bool:
    """Return free heap pages to the system; ``False`` where the C library cannot."""
    if _LIBC is None:
        return False
    _LIBC.malloc_trim(0)
    return True


def fix_mmap_threshold(threshold: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Map every block of ``threshold`` bytes or more on its own, from now on, and stop glibc from
    raising that bound; ``False`` where the C library cannot, or the user set
    ``MALLOC_MMAP_THRESHOLD_`` (glibc applied theirs already)."""
    if _LIBC is None or MMAP_THRESHOLD_ENV in os.environ:
        return False
    if _LIBC.mallopt(_M_MMAP_THRESHOLD, threshold) != 1:
        logger.debug("mallopt(M_MMAP_THRESHOLD, %d) refused", threshold)
        return False
    return True
