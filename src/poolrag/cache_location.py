"""Where poolrag keeps its files on disk: one rule for the embedding cache, checkpoints and compiled
graphs, so ``POOLRAG_CACHE_DIR`` moves all of them together."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def poolrag_cache_dir() -> Path:
    """``$POOLRAG_CACHE_DIR``, else ``poolrag`` under ``$XDG_CACHE_HOME`` or ``~/.cache``."""
    root = os.environ.get("POOLRAG_CACHE_DIR")
    if root:
        return Path(root).expanduser()  # a quoted "~/x" (an env file, a Dockerfile) is not expanded
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "poolrag"


def partial_path(path: Path) -> Path:
    """A name beside ``path`` to write it under before the rename, this writer's alone: the process
    id is not (containers sharing one cache folder each run as PID 1, threads share theirs), and two
    writers of one name truncate each other's file and fail each other's rename."""
    return path.with_suffix(f".{os.getpid()}-{secrets.token_hex(4)}.partial")
