"""Which optional extra a subcommand needs, checked before anything heavy is imported.

A user installs only the extras a command names; a missing one is a single line naming the extra
(exit 2), never an ``ImportError`` traceback from deep inside a store client.
"""

from __future__ import annotations

import sys

from poolrag.stores.registry import STORES, module_installed

EXIT_MISSING_EXTRA = 2

# extra -> top-level modules it installs (looked up, not imported); the store extras come from the
# store registry, so a store kind and its extra are written in one place
SERVICE_EXTRAS: dict[str, tuple[str, ...]] = {
    "server": ("fastapi", "starlette", "pydantic", "uvicorn", "prometheus_client"),
    "ray": ("ray",),
}


def extra_modules() -> dict[str, tuple[str, ...]]:
    """Every extra a subcommand may need, mapped to the top-level modules it installs."""
    stores = {entry.extra: entry.client_modules for entry in STORES.values() if entry.extra}
    return {**SERVICE_EXTRAS, **stores}


def missing_extra(extra: str) -> list[str]:
    """The modules of ``extra`` that are not installed (empty when the extra is complete)."""
    return [module for module in extra_modules()[extra] if not module_installed(module)]


def require_extra(command: str, extra: str, hint: str = "") -> bool:
    """True when ``extra`` is installed; otherwise print the one-line fix (and ``hint``) to stderr
    and return False."""
    missing = missing_extra(extra)
    if not missing:
        return True
    print(
        f'poolrag {command} needs the {extra} extra: pip install "poolrag[{extra}]" '
        f"(missing: {', '.join(missing)}){hint}",
        file=sys.stderr,
    )
    return False


def require_store_extra(command: str, kind: str) -> bool:
    """:func:`require_extra` for the extra the store registry names for ``kind`` (none: True); the
    stores this environment has are named, since the likely mistake is a forgotten ``--store``."""
    extra = STORES[kind].extra
    if extra is None:
        return True
    others = [
        f"--store {name}"
        for name, entry in STORES.items()
        if name != kind and entry.extra is not None and not missing_extra(entry.extra)
    ]
    hint = f"; or use a store installed here: {', '.join(others)}" if others else ""
    return require_extra(command, extra, hint)
