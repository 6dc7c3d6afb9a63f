"""HTTP client for ``poolrag serve`` with the engine's result types (numpy arrays)."""

from poolrag.client.client import PoolragClient
from poolrag.client.errors import RemoteError, RemoteInvalidInputError, ServedModelChangedError
from poolrag.client.wire import RerankedDocument

__all__ = [
    "PoolragClient",
    "RemoteError",
    "RemoteInvalidInputError",
    "RerankedDocument",
    "ServedModelChangedError",
]
