"""Partner-package classes that need an optional extra, importable without it.

``from langchain_poolrag import *`` reads every name in ``__all__``; a class whose vector-store
package is missing would fail the whole import there, although the user never asked for it. So such
a name resolves to a stand-in that raises the module's one-line ``ImportError`` (naming the extra)
when it is constructed, the first moment the extra is really needed. Only a *missing* extra makes a
stand-in: with the extra installed, the module imports as any other, and its errors surface.
"""

from __future__ import annotations

import functools
import importlib.util
from importlib import import_module
from typing import Any, NoReturn


@functools.cache  # one class per name, as an import gives
def optional_class(module: str, name: str, extra_package: str) -> type:
    """``module.name``; where ``extra_package`` (what ``module`` imports from the extra) is not
    installed, a stand-in whose construction raises the ``ImportError`` importing ``module`` gives.
    Every argument is a constant of the caller's."""
    if not _installed(extra_package):
        try:
            import_module(module)
        except ImportError as missing:
            message = str(missing)

            def refuse(*args: Any, **kwargs: Any) -> NoReturn:
                raise ImportError(message)

            attributes = {"__init__": refuse, "__doc__": f"Not installed: {message}", "__module__": module}
            return type(name, (), attributes)
    return getattr(import_module(module), name)


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):  # a package blocked in sys.modules, or half-imported
        return False
