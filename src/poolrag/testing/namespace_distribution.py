"""Checks for a distribution that adds one leaf to namespaces it shares (PEP 420), as each LlamaIndex
integration adds ``llama_index.<namespace>.<name>`` beside llama-index-core and every other one.

An ``__init__.py`` in a shared folder would shadow the other distributions' parts of it; a class
missing from the leaf's ``__all__`` or not built on the framework's base would not be found where the
framework's users look.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path


def namespace_problems(package_root: Path, module: str, classes: Mapping[str, str]) -> list[str]:
    """What is wrong with the distribution in ``package_root`` whose leaf is ``module`` (dotted), which
    should export each of ``classes`` (name -> the name of a base class it must derive from)."""
    parts = module.split(".")
    problems = [
        f"{'/'.join(parts[:depth])}/__init__.py claims a shared namespace"
        for depth in range(1, len(parts))
        if (package_root.joinpath(*parts[:depth]) / "__init__.py").exists()
    ]
    if not (package_root.joinpath(*parts) / "__init__.py").is_file():
        problems.append(f"{'/'.join(parts)}/__init__.py is missing")
    imported = importlib.import_module(module)
    for name, base in classes.items():
        if name not in getattr(imported, "__all__", ()):
            problems.append(f"{module}.__all__ lacks {name}")
        elif base not in [cls.__name__ for cls in getattr(imported, name).__mro__]:
            problems.append(f"{module}.{name} does not derive from {base}")
    return problems
