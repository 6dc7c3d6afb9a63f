"""Errors of the HTTP client, mapped onto poolrag's own so callers catch one family.

A request the server rejects as bad input raises :class:`RemoteInvalidInputError`, a ``ValueError``
like the in-process engine's errors, so code written against ``Engine`` handles both the same way.
"""

from __future__ import annotations

from poolrag.errors import InvalidInputError, PoolragError


class RemoteError(PoolragError, RuntimeError):
    """The server could not be reached or failed on its side (auth, overload, 5xx)."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class RemoteInvalidInputError(InvalidInputError):
    """The server rejected the request as invalid (HTTP 400, 413 or 422)."""

    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code
