"""glibc's allocator, tuned for a long-running process that handles tensors of ever-different sizes.

Forward passes and tokenisers allocate through ``malloc`` from several threads, and glibc keeps
what they free: freed blocks below one still in use stay resident (only the heap's top is trimmed),
and after freeing a large mapped block glibc raises its mmap threshold (up to 32 MiB), so later
large buffers (a batch's hidden states) come from the heap too, where each batch's differently
sized buffers leave holes. An ingest grew by ~110 KB per chunk from this alone.
:func:`trim_heap` (``malloc_trim(0)``) returns the free pages of every arena.

Pinning the mmap threshold low (128 KiB), so that large buffers are mapped and unmapped whole, has
a price the memory curves do not show: every large buffer of every layer is a fresh mapping,
faulted in page by page, and a forward pass ran 1.3x slower in fp32 and 1.8x slower with the int8
fast mode (benchmarks/RESULTS.md). So a process that owns its heap (the CLI) keeps glibc's own
threshold, its buffers reused from layer to layer, and gives the free pages back when a forward
batch ends (:func:`trim_after_batches`): a library caller's speed, with memory still flat. At most
every :data:`TRIM_INTERVAL_S`, though, and a server every :data:`SERVER_TRIM_INTERVAL_S`: a trim
hands back pages the next batch faults in again, and a server answering one-text requests ends
hundreds of batches a second (trimming after each cost a fifth of its throughput on a small model,
benchmarks/RESULTS.md).

A server's threads (the event loop's workers parse, tokenise and encode answers) each take an arena
of their own, up to eight per core, and a trim cannot give back a page that still holds one live
block: after a burst the residue grew with the number of arenas (1.44x the post-load idle, 1.29x
after a trim; 1.09x with four arenas on 2 cores, benchmarks/RESULTS.md). :func:`bound_arenas` caps
them at one per CPU it may use (at least four).

Elsewhere than glibc (musl, macOS) these do nothing and say so by returning ``False``.
"""

from __future__ import annotations

import ctypes
import logging
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

from poolrag.cpu_budget import PROC_SELF, usable_cpus

logger = logging.getLogger(__name__)


def _glibc() -> Any | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)  # the C library this process already runs on
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
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


#: glibc's ``mallopt`` parameter for the most arenas (``M_ARENA_MAX``).
_M_ARENA_MAX = -8
#: Fewest arenas a process that owns its heap keeps: the engine's and the tokenising threads.
ARENA_MIN = 4


def default_arenas(proc_self: Path = PROC_SELF) -> int:
    """One arena per CPU this process may use, at least :data:`ARENA_MIN`: glibc's default is
    eight per CPU, whose half-used arenas hold a burst's memory after it; fewer than one per CPU
    would make threads that allocate at once wait on each other on a large machine. The CPUs are
    the affinity mask cut to a container's CPU quota (:func:`~poolrag.cpu_budget.usable_cpus`), as
    for torch's threads: under ``--cpus 2`` on a 64-core host no more than two CPUs' worth of
    threads run at once, and 64 arenas would hold what a burst left, as glibc's own default does."""
    return max(ARENA_MIN, usable_cpus(proc_self))


def bound_arenas(arenas: int | None = None) -> bool:
    """Cap glibc's arenas at ``arenas`` (default :func:`default_arenas`; before the threads that
    would take more start); the user's ``MALLOC_ARENA_MAX`` wins. ``False`` where the C library
    cannot or the user set it."""
    if _LIBC is None or "MALLOC_ARENA_MAX" in os.environ:
        return False
    return bool(_LIBC.mallopt(_M_ARENA_MAX, default_arenas() if arenas is None else arenas))


#: Least time between two trims at the end of a batch, in a command that owns its process. A CPU
#: batch of an ingest takes longer, so each of those is still followed by one.
TRIM_INTERVAL_S = 0.5
#: The same for a server, whose one-text requests end many small batches a second: each trim costs
#: the page faults of the buffers the next batches take back (every 0.5 s, 3-8% of a served
#: MiniLM's texts/s at 16 and 64 connections; every 5 s, nothing measurable: benchmarks/RESULTS.md).
#: Its idle trim and the trim after a large body give back the rest.
SERVER_TRIM_INTERVAL_S = 5.0

_trim_interval_s: float | None = None  # set by the CLI for the process it owns (serve: its own pace)
_last_trim = -math.inf


def trim_after_batches(interval_s: float = TRIM_INTERVAL_S) -> bool:
    """From now on, every engine of this process trims the heap when a forward batch ends, at most
    every ``interval_s`` (the CLI's choice for the process it owns); ``False`` where the C library
    cannot."""
    global _trim_interval_s
    _trim_interval_s = interval_s if heap_tunable() else None
    return _trim_interval_s is not None


def batch_finished() -> None:
    """Called by the engine core after each forward batch: trims when the process asked for it and
    the last trim is as old as the interval it asked for."""
    global _last_trim
    if _trim_interval_s is not None and time.monotonic() - _last_trim >= _trim_interval_s:
        trim_heap()
        _last_trim = time.monotonic()
