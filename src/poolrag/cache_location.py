"""Where poolrag keeps its files on disk: one rule for the embedding cache, checkpoints and compiled
graphs, so ``POOLRAG_CACHE_DIR`` moves all of them together."""

from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path


def poolrag_cache_dir() -> Path:
    """``$POOLRAG_CACHE_DIR``, else ``poolrag`` under ``$XDG_CACHE_HOME`` or ``~/.cache``; for a
    user with no home (no ``$HOME`` and no passwd entry: a container run under an arbitrary uid),
    ``poolrag-cache-UID`` in the temp folder, as torch's compile cache, rather than a
    ``RuntimeError`` from every command (the help texts name this folder)."""
    root = os.environ.get("POOLRAG_CACHE_DIR")
    if root:
        return Path(root).expanduser()  # a quoted "~/x" (an env file, a Dockerfile) is not expanded
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg) / "poolrag"
    home = os.path.expanduser("~")
    if home == "~":
        return Path(tempfile.gettempdir()) / f"poolrag-cache-{os.getuid()}"
    return Path(home) / ".cache" / "poolrag"


def partial_path(path: Path) -> Path:
    """A name beside ``path`` to write it under before the rename, this writer's alone: the process
    id is not (containers sharing one cache folder each run as PID 1, threads share theirs), and two
    writers of one name truncate each other's file and fail each other's rename."""
    return path.with_suffix(f".{os.getpid()}-{secrets.token_hex(4)}.partial")
