"""Errors of the vector-store layer, each with a message that says what to do next."""

from __future__ import annotations

from poolrag.errors import InvalidInputError, PoolragError


class CollectionMismatchError(InvalidInputError):
    """The collection holds vectors of another model, size or layout; writing would mix them."""


class CollectionNotFoundError(InvalidInputError):
    """Search asked for a collection that does not exist (nothing was ingested into it)."""


class StoreUnavailableError(PoolragError, ConnectionError):
    """The database could not be reached (or stayed locked) even after retrying."""

    def __init__(self, message: str, attempts: int = 1) -> None:
        super().__init__(message)
        self.attempts = attempts


class StoreRequestError(PoolragError, RuntimeError):
    """The address answered but refused the request: another service on that port, credentials the
    database does not take, or an error on its side. Retrying would not help, so it is not retried."""


class UnsupportedStoreFeature(InvalidInputError):
    """The store (or this collection's layout) cannot do what was asked, e.g. sparse search in a
    collection created without a sparse field."""


class UnsafeStoreFileError(InvalidInputError):
    """A store file holds something its client would run as code on opening it; it is not opened."""
