"""Which optional extra a subcommand needs, checked before anything heavy is imported.

A user installs only the extras a command names; a missing one is a single line naming the extra
(exit 2), never an ``ImportError`` traceback from deep inside a store client.
"""

from __future__ import annotations

import importlib.util
import sys

EXIT_MISSING_EXTRA = 2

# extra -> top-level modules it installs (looked up, not imported)
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "server": ("fastapi", "starlette", "pydantic", "uvicorn", "prometheus_client"),
    "milvus": ("pymilvus", "milvus_lite"),
    "qdrant": ("qdrant_client",),
    "qdrant-edge": ("qdrant_edge",),
    "ray": ("ray",),
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken or half-installed package
        return False


def missing_extra(extra: str) -> list[str]:
    """The modules of ``extra`` that are not installed (empty when the extra is complete)."""
    return [module for module in EXTRA_MODULES[extra] if not _installed(module)]


def require_extra(command: str, extra: str) -> bool:
    """True when ``extra`` is installed; otherwise print the one-line fix to stderr and return False."""
    missing = missing_extra(extra)
    if not missing:
        return True
    print(
        f'poolrag {command} needs the {extra} extra: pip install "poolrag[{extra}]" '
        f"(missing: {', '.join(missing)})",
        file=sys.stderr,
    )
    return False
