"""``$POOLRAG_MODEL_MAP``: hub ids answered by local folders, on machines that cannot reach the hub.

Code and docs name models by hub id (``cross-encoder/ms-marco-MiniLM-L-12-v2``). On an offline
machine, or to run documented examples on a folder built elsewhere, the variable maps those ids to
folders without editing the code: ``HUB_ID=FOLDER`` entries separated by commas or newlines, e.g.
``POOLRAG_MODEL_MAP="cross-encoder/ms-marco-MiniLM-L-12-v2=~/models/ms-marco"``. Every door that
resolves a model (``Engine``, ``LLM``, ``poolrag serve/ingest/search``, the framework adapters)
reads it; a mapped id never goes to the hub.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from poolrag.errors import ModelLoadError

ENV_VAR = "POOLRAG_MODEL_MAP"
_ENTRY_SEPARATOR = re.compile(r"[,\n]")


def mapped_folder(model_id: str) -> Path | None:
    """The folder ``$POOLRAG_MODEL_MAP`` gives for ``model_id``, or None when it names none. A
    malformed entry, or an entry for ``model_id`` whose folder is missing, is a one-line
    :class:`ModelLoadError` naming the variable (never a silent fall-back to the hub)."""
    folders = _read_map(os.environ.get(ENV_VAR, ""))
    folder = folders.get(model_id)
    if folder is None:
        return None
    if not folder.is_dir():
        raise ModelLoadError(f"${ENV_VAR} maps {model_id!r} to {str(folder)!r}, which is not a folder")
    return folder.resolve()


def _read_map(text: str) -> dict[str, Path]:
    folders: dict[str, Path] = {}
    for entry in filter(None, (part.strip() for part in _ENTRY_SEPARATOR.split(text))):
        model_id, equals, folder = (part.strip() for part in entry.partition("="))
        if not equals or not model_id or not folder:
            raise ModelLoadError(f"${ENV_VAR}: {entry!r} is not HUB_ID=FOLDER")
        folders[model_id] = Path(folder).expanduser()
    return folders
