"""Partner-package classes that need an optional extra, importable without it.

``from langchain_poolrag import *`` reads every name in ``__all__``; a class whose vector-store
package is missing would fail the whole import there, although the user never asked for it. So such
a name resolves to a stand-in that raises the module's one-line ``ImportError`` (naming the extra)
when it is constructed, the first moment the extra is really needed.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any, NoReturn


def optional_class(module: str, name: str) -> type:
    """``module.name``, or where importing ``module`` fails for a missing extra, a stand-in class
    whose construction raises that ``ImportError``. ``module`` is always a constant of the caller's."""
    try:
        return getattr(import_module(module), name)
    except ImportError as missing:
        message = str(missing)

    def refuse(*args: Any, **kwargs: Any) -> NoReturn:
        raise ImportError(message)

    return type(name, (), {"__init__": refuse, "__doc__": f"Not installed: {message}", "__module__": module})
