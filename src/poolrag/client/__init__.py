"""HTTP client for ``poolrag serve`` with the engine's result types (numpy arrays).

The public names are resolved on first use, as the ``poolrag`` facade's are: the server imports
:mod:`poolrag.client.wire` (the protocol both sides speak), and that must not need httpx, which only
the client itself uses (``poolrag serve`` with the ``server`` extra alone died on it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from poolrag.client.client import PoolragClient
    from poolrag.client.errors import (
        RemoteConnectionError,
        RemoteError,
        RemoteInvalidInputError,
        RemoteTimeoutError,
        ServedModelChangedError,
    )
    from poolrag.client.wire import RerankedDocument

# public name -> module that defines it
_EXPORTS = {
    "PoolragClient": "poolrag.client.client",
    "RemoteConnectionError": "poolrag.client.errors",
    "RemoteError": "poolrag.client.errors",
    "RemoteInvalidInputError": "poolrag.client.errors",
    "RemoteTimeoutError": "poolrag.client.errors",
    "ServedModelChangedError": "poolrag.client.errors",
    "RerankedDocument": "poolrag.client.wire",
}

__all__ = [
    "PoolragClient",
    "RemoteConnectionError",
    "RemoteError",
    "RemoteInvalidInputError",
    "RemoteTimeoutError",
    "RerankedDocument",
    "ServedModelChangedError",
]


if not TYPE_CHECKING:  # a checker reads the imports above instead, so a misspelt name is an error there

    def __getattr__(name: str) -> Any:
        module = _EXPORTS.get(name)
        if module is None:
            raise AttributeError(f"module 'poolrag.client' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later look-ups skip this function
        return value
