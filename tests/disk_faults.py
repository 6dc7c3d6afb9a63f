"""Disk faults made real for the command-line tests: a small tmpfs is a disk that fills up, a
read-only bind mount a folder nobody may write (root included, unlike permission bits), and
``poolrag`` runs in a subprocess whose stderr must be one line.

Mounting needs root, which CI has (it runs as root on the same kind of machine). A test that cannot
mount fails, naming what it needed; it is never skipped, so a missing privilege cannot pass for a
fixed fault.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

FILLER = ".filler"


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"this test needs root to run 'mount {' '.join(args)}': {done.stderr.strip()}")


@contextmanager
def small_disk(folder: Path, size_bytes: int) -> Iterator[Path]:
    """A tmpfs of ``size_bytes`` mounted on ``folder`` (made if missing) for the block."""
    folder.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(folder))
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


@contextmanager
def read_only_view(source: Path, view: Path) -> Iterator[Path]:
    """``source`` seen read-only at ``view`` (a read-only bind mount) for the block."""
    view.mkdir(parents=True, exist_ok=True)
    _mount("--bind", str(source), str(view))
    try:
        _mount("-o", "remount,ro,bind", str(view))
        yield view
    finally:
        subprocess.run(["umount", "-l", str(view)], check=True)


def free_bytes(folder: Path) -> int:
    stats = os.statvfs(folder)
    return stats.f_bavail * stats.f_frsize


def fill_to(folder: Path, free: int) -> None:
    """Leave about ``free`` bytes free on ``folder``'s disk (a filler file takes the rest)."""
    filler = folder / FILLER
    filler.unlink(missing_ok=True)
    size = free_bytes(folder) - free
    assert size > 0, f"{folder} has less than {free} bytes free already"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.posix_fallocate(fd, 0, size)
    finally:
        os.close(fd)


def empty_filler(folder: Path) -> None:
    (folder / FILLER).unlink(missing_ok=True)


def run_poolrag(args: list[str], home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env["POOLRAG_CACHE_DIR"] = str(home / "poolrag-home")
    return subprocess.run(
        [sys.executable, "-m", "poolrag.cli", *args], capture_output=True, text=True, timeout=600, env=env
    )


def one_line(stderr: str) -> str:
    """The single line a fault may print (library warnings of torch and torchao set aside)."""
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if line.strip() and "torchao" not in line]
    lines = [line for line in lines if not line.startswith("W") or "poolrag" in line]  # torch's own
    assert len(lines) == 1, stderr[-3000:]
    return lines[0]
