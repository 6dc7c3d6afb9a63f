"""glibc's heap tuned for long runs (issue 27): freed pages go back, large buffers stay mapped."""

from __future__ import annotations

import ctypes
import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from poolrag.native_heap import MMAP_THRESHOLD_ENV, trim_heap

glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim/mallopt are glibc's")


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


# In a child process: mallopt changes the whole process for good. Freeing one large mapped block
# makes glibc raise its mmap threshold to that size, so the 1 MB blocks after it come from the
# heap, where the last of them, kept, holds the others resident after free; a fixed threshold maps
# each of them on its own and unmaps it on free. Prints (fixed?, MB still held after the frees).
_HEAP_PROBE = textwrap.dedent(
    """
    import ctypes, sys
    from pathlib import Path
    from poolrag.native_heap import fix_mmap_threshold

    def rss():
        line = next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmRSS"))
        return int(line.split()[1]) / 1024

    fixed = fix_mmap_threshold() if sys.argv[1] == "fix" else False
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.free(libc.malloc(8 << 20))  # a large mapped block, freed: glibc would raise its threshold
    before = rss()
    blocks = [libc.malloc(1 << 20) for _ in range(200)]
    for address in blocks:
        ctypes.memset(address, 1, 1 << 20)
    for address in blocks[:-1]:  # the last, highest block stays in use
        libc.free(address)
    print(fixed, round(rss() - before))
    """
)


def _probe(mode: str, **env: str) -> tuple[bool, float]:
    done = subprocess.run(
        [sys.executable, "-c", _HEAP_PROBE, mode],
        capture_output=True,
        text=True,
        timeout=60,
        env={**{k: v for k, v in os.environ.items() if k != MMAP_THRESHOLD_ENV}, **env},
        check=True,
    )
    fixed, held = done.stdout.split()
    return fixed == "True", float(held)


@glibc_only
def test_a_fixed_mmap_threshold_gives_large_freed_blocks_back_at_once() -> None:
    """200 blocks of 1 MB, freed under a live block: with the threshold pinned (what the CLI does
    at start) nothing stays resident; glibc's own moving threshold keeps them all."""
    fixed, held = _probe("fix")
    assert fixed and held < 20, f"{held:.0f} MB still resident"
    fixed, held = _probe("default")
    assert not fixed and held > 150, f"glibc's default kept only {held:.0f} MB"


@glibc_only
def test_the_users_own_mmap_threshold_wins() -> None:
    """``MALLOC_MMAP_THRESHOLD_`` in the environment: glibc applied it already, poolrag leaves it."""
    assert _probe("fix", **{MMAP_THRESHOLD_ENV: "33554432"})[0] is False
