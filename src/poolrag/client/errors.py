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


class ServedModelChangedError(InvalidInputError):
    """The server now serves other weights (or pools them differently) than the facts this client
    read: it restarted with another model under the same name and URL. The client drops its facts,
    so the next call reads the new ones; what was keyed on the old facts (cache entries, a
    collection) belongs to the old model."""
