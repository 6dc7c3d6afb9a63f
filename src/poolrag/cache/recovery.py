"""Which SQLite errors mean a damaged cache file (set it aside) and which the user must fix.

Corruption (``SQLITE_CORRUPT``, ``SQLITE_NOTADB``) costs only recomputation, so the cache recovers
by itself. A file or folder that cannot be opened or written (permissions, a read-only disk, a
folder where the file should be) is not the cache's to fix: it becomes one
:class:`CacheAccessError` naming the file and the way out, never a traceback.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from poolrag.errors import InvalidInputError

_CORRUPT_CODES = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB
_CORRUPT_WORDS = ("malformed", "not a database", "database corruption")


class CacheAccessError(InvalidInputError):
    """The embedding cache file cannot be opened or written."""


def is_corruption(exc: BaseException) -> bool:
    """Whether ``exc`` says the database file itself is damaged."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in _CORRUPT_CODES:
        return True
    text = str(exc).lower()
    return any(word in text for word in _CORRUPT_WORDS)


def cache_access_error(path: Path, exc: BaseException) -> CacheAccessError | None:
    """The user-facing error for a cache that cannot be used; ``None`` for locks and bugs."""
    text = str(exc).lower()
    if isinstance(exc, OSError) or any(
        word in text for word in ("readonly", "read-only", "unable to open", "permission", "disk i/o")
    ):
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return CacheAccessError(
            f"cannot use the embedding cache {path}: {reason}; pass --cache FILE in a writable folder, "
            "or --no-cache"
        )
    return None
