"""After a large request the server gives freed heap pages back (glibc ``malloc_trim``, issue 27)."""

from __future__ import annotations

import ctypes
import platform
from pathlib import Path

import pytest

from poolrag.server.heap_trim import trim_heap

glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@glibc_only
def test_freed_heap_pages_below_a_live_block_go_back_to_the_system() -> None:
    """Freed blocks under a block still in use stay resident (glibc only trims the heap's top);
    :func:`trim_heap` returns them."""
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    block = 64 * 1024  # below the mmap threshold: from the heap
    blocks = [libc.malloc(block) for _ in range(3200)]  # 200 MB
    for address in blocks:
        ctypes.memset(address, 1, block)
    pin = libc.malloc(block)  # keeps the heap's top in use
    for address in blocks:
        libc.free(address)
    held = _rss_mb()
    assert trim_heap()
    released = held - _rss_mb()
    libc.free(pin)
    assert released > 150, f"{released:.0f} MB given back"
