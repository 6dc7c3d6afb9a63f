"""HTTP client for ``poolrag serve`` with the engine's result types (numpy arrays).

:class:`PoolragClient` is resolved on first use: the server imports :mod:`poolrag.client.wire` (the
protocol both sides speak), and that must not need httpx, which only the client itself uses (the
``server`` extra alone does not install it). The errors and the protocol's types need no httpx, and
are imported as usual.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from poolrag.client.errors import (
    RemoteConnectionError,
    RemoteError,
    RemoteInvalidInputError,
    RemoteTimeoutError,
    ServedModelChangedError,
)
from poolrag.client.wire import RerankedDocument

if TYPE_CHECKING:
    from poolrag.client.client import PoolragClient

__all__ = [
    "PoolragClient",
    "RemoteConnectionError",
    "RemoteError",
    "RemoteInvalidInputError",
    "RemoteTimeoutError",
    "RerankedDocument",
    "ServedModelChangedError",
]


if not TYPE_CHECKING:  # a checker reads the import above instead, so a misspelt name is an error there

    def __getattr__(name: str) -> Any:
        if name != "PoolragClient":
            raise AttributeError(f"module 'poolrag.client' has no attribute {name!r}")
        from poolrag.client.client import PoolragClient

        globals()[name] = PoolragClient  # later look-ups skip this function
        return PoolragClient
