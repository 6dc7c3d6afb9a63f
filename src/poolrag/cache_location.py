"""Where poolrag keeps its files on disk: one rule for the embedding cache, checkpoints and compiled
graphs, so ``POOLRAG_CACHE_DIR`` moves all of them together."""

from __future__ import annotations

import os
from pathlib import Path


def poolrag_cache_dir() -> Path:
    """``$POOLRAG_CACHE_DIR``, else ``poolrag`` under ``$XDG_CACHE_HOME`` or ``~/.cache``."""
    root = os.environ.get("POOLRAG_CACHE_DIR")
    if root:
        return Path(root).expanduser()  # a quoted "~/x" (an env file, a Dockerfile) is not expanded
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "poolrag"
