"""glibc's heap tuned for long runs (issue 27): freed pages go back, in a CLI process when batches end."""

from __future__ import annotations

import ctypes
import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from poolrag import native_heap
from poolrag.native_heap import trim_heap

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


# In a child process: the policy is for the whole process, for good. Freeing one large mapped block
# makes glibc raise its mmap threshold to that size, so the 1 MB blocks after it come from the heap,
# where the last of them, kept, holds the others resident after free, until the heap is trimmed.
# Prints (trimming on?, MB still held after the frees and the end of a "batch").
_HEAP_PROBE = textwrap.dedent(
    """
    import ctypes, sys
    from pathlib import Path
    from poolrag.cli import bound_native_memory
    from poolrag.native_heap import batch_finished

    def rss():
        line = next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmRSS"))
        return int(line.split()[1]) / 1024

    if sys.argv[1] == "cli":
        bound_native_memory()  # what every `poolrag` command does first
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.free(libc.malloc(8 << 20))  # a large mapped block, freed: glibc raises its threshold
    before = rss()
    blocks = [libc.malloc(1 << 20) for _ in range(200)]
    for address in blocks:
        ctypes.memset(address, 1, 1 << 20)
    for address in blocks[:-1]:  # the last, highest block stays in use
        libc.free(address)
    batch_finished()  # what the engine core calls after each forward batch
    print(round(rss() - before))
    """
)


def _probe(mode: str) -> float:
    done = subprocess.run(
        [sys.executable, "-c", _HEAP_PROBE, mode], capture_output=True, text=True, timeout=60, check=True
    )
    return float(done.stdout.split()[-1])


@glibc_only
def test_a_cli_process_gives_freed_heap_pages_back_when_a_batch_ends() -> None:
    """200 blocks of 1 MB from the heap, freed under a live block: a `poolrag` command's process
    returns them at the end of the batch; a library caller's process (no policy) keeps them."""
    assert _probe("cli") < 20
    assert _probe("library") > 150


def test_the_engine_core_ends_every_batch_with_the_heap_policy(
    monkeypatch: pytest.MonkeyPatch, tiny_model
) -> None:
    import poolrag.core.engine_core
    from poolrag import Engine
    from poolrag.testing import engine_internals as internals

    ended: list[int] = []
    monkeypatch.setattr(poolrag.core.engine_core, "batch_finished", lambda: ended.append(1))
    engine = Engine(tiny_model("bert"), max_batch_tokens=512)
    engine.embed_array([" ".join(["word"] * 100) + f" {i}" for i in range(40)])  # ~4,000 tokens
    batches = internals.core(engine).stats.batches
    assert batches > 1 and len(ended) == batches


def _trims_over(seconds: float, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """When the heap is trimmed while batches of 1/256 s (exact in binary) end for ``seconds``."""
    trims: list[float] = []
    clock = [1000.0]
    monkeypatch.setattr(native_heap, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    monkeypatch.setattr(native_heap, "trim_heap", lambda: trims.append(clock[0] - 1000.0) or True)
    monkeypatch.setattr(native_heap, "_last_trim", float("-inf"))
    for _ in range(int(seconds * 256)):
        native_heap.batch_finished()
        clock[0] += 1 / 256
    return trims


@glibc_only
def test_batches_that_end_close_together_share_one_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    """A trim gives back pages the next batch faults in again: hundreds of small batches a second
    are trimmed at most every TRIM_INTERVAL_S, a slow batch each time."""
    monkeypatch.setattr(native_heap, "_trim_interval_s", None)
    assert native_heap.trim_after_batches()
    assert _trims_over(0.9, monkeypatch) == [0.0, native_heap.TRIM_INTERVAL_S]
    assert _trims_over(0.1, monkeypatch) == [0.0]  # the first batch after a long one: trimmed


@glibc_only
def test_a_server_trims_at_its_own_longer_interval(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`poolrag serve` paces the trims at SERVER_TRIM_INTERVAL_S (a served MiniLM lost 3-8% of its
    texts/s to a trim every 0.5 s), whatever main() chose for a batch job before it."""
    from poolrag.cli import build_parser

    monkeypatch.setattr(native_heap, "_trim_interval_s", native_heap.TRIM_INTERVAL_S)
    args = build_parser().parse_args(["serve", str(tmp_path / "no-such-model"), "--port", "0"])
    assert args.handler(args) == 2  # the model is missing: after the pacing was chosen
    interval = native_heap.SERVER_TRIM_INTERVAL_S
    assert interval > 2 * native_heap.TRIM_INTERVAL_S
    assert _trims_over(2.5 * interval, monkeypatch) == [0.0, interval, 2 * interval]


def test_a_library_process_never_trims_when_a_batch_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    trims: list[int] = []
    monkeypatch.setattr(native_heap, "trim_heap", lambda: trims.append(1) or True)
    monkeypatch.setattr(native_heap, "_trim_interval_s", None)
    monkeypatch.setattr(native_heap, "_last_trim", float("-inf"))
    native_heap.batch_finished()
    assert trims == []


_ARENAS_SCRIPT = textwrap.dedent(
    """
    import ctypes, threading
    from poolrag.native_heap import bound_arenas
    print(bound_arenas(2))
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    barrier = threading.Barrier(8)
    def allocate():
        barrier.wait()  # all eight allocate at once, so each would take an arena of its own
        libc.malloc(4096)
    threads = [threading.Thread(target=allocate) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    libc.malloc_stats()  # one "Arena N:" line per arena, on stderr
    """
)


@glibc_only
@pytest.mark.parametrize(("user_setting", "most_arenas"), [(None, 2), ("8", 8)])
def test_bound_arenas_caps_the_heap_arenas_unless_the_user_set_malloc_arena_max(
    user_setting: str | None, most_arenas: int
) -> None:
    """Threads that allocate at once take an arena each, up to eight per core; capped, they share."""
    env = {key: value for key, value in os.environ.items() if key != "MALLOC_ARENA_MAX"}
    if user_setting is not None:
        env["MALLOC_ARENA_MAX"] = user_setting
    done = subprocess.run([sys.executable, "-c", _ARENAS_SCRIPT], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(user_setting is None)
    arenas = done.stderr.count("Arena ")
    assert 1 <= arenas <= most_arenas, done.stderr
    if user_setting is not None:
        assert arenas > 2, "the user's setting, not the cap, decides"


def test_the_default_arena_count_follows_a_containers_cpu_quota(
    one_cpu_proc_self: Path, tmp_path: Path
) -> None:
    """Under ``docker --cpus 1`` the affinity mask still holds every host core, and one arena per
    host core held what a burst left, as glibc's own default does: the quota bounds the arenas, as
    it bounds torch's threads (one CPU: the fewest, :data:`~poolrag.native_heap.ARENA_MIN`)."""
    assert native_heap.default_arenas(one_cpu_proc_self) == native_heap.ARENA_MIN
    unlimited = max(native_heap.ARENA_MIN, len(os.sched_getaffinity(0)))
    assert native_heap.default_arenas(tmp_path / "no-proc") == unlimited
