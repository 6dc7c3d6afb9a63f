"""Where the real-weight test models live once ``python scripts/build_test_assets.py`` built them.

The builder stays a development tool in ``scripts/`` (it downloads wheels and needs onnx); tests that
only read the folders, such as the partner packages', find them here and are told how to build them
when they are missing.
"""

from __future__ import annotations

import os
from pathlib import Path

from poolrag.errors import PoolragError

ENV_DEST = "POOLRAG_TEST_ASSETS"
DEFAULT_DEST = Path("~/.cache/poolrag/test-assets")
#: written into each folder last, so a folder that has it was completed
MARKER_NAME = ".poolrag-asset.json"


class MissingTestAssetsError(PoolragError):
    """The asset folders a test needs were never built (or were built elsewhere)."""


def resolve_dest(dest: Path | str | None = None) -> Path:
    """``dest`` if given, else ``$POOLRAG_TEST_ASSETS``, else ``~/.cache/poolrag/test-assets``."""
    chosen = dest if dest is not None else os.environ.get(ENV_DEST) or DEFAULT_DEST
    return Path(chosen).expanduser().resolve()


def built_assets(*folders: str) -> Path:
    """The asset root, checked to hold each of ``folders`` completed; else one line on building them."""
    root = resolve_dest()
    missing = [name for name in folders if not (root / name / MARKER_NAME).is_file()]
    if missing:
        raise MissingTestAssetsError(
            f"test assets {', '.join(missing)} are not built under {root} (${ENV_DEST}): "
            "run python scripts/build_test_assets.py in a poolrag checkout"
        )
    return root
