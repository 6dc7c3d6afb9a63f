"""Which SQLite errors mean a damaged cache file (set it aside) and which the user must fix.

Corruption (``SQLITE_CORRUPT``, ``SQLITE_NOTADB``) costs only recomputation, so the cache recovers
by itself. A file or folder that cannot be opened or written (permissions, a read-only disk, a
folder where the file should be) is not the cache's to fix: it becomes one
:class:`CacheAccessError` naming the file and the way out, never a traceback. A disk that fills up
(or a file size limit reached) mid-run is :class:`CacheWriteError`: the run stops there, as it
does when a store's disk is full (exit code 4 in the CLI), and the transaction that failed left
the file as it was, so nothing stored before is lost.
"""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

from poolrag.errors import InvalidInputError, PoolragError
from poolrag.lock_holders import held_by

_CORRUPT_CODES = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB
_FULL_CODE = 13  # SQLITE_FULL: "database or disk is full"
#: SQLITE_IOERR_WRITE, _FSYNC, _TRUNCATE: a write the disk refused (a file size limit gives these)
_WRITE_IOERR_CODES = {10 | (3 << 8), 10 | (4 << 8), 10 | (6 << 8)}
_FULL_ERRNOS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exhausted",
    errno.EFBIG: "a file size limit was reached",
}
_CORRUPT_WORDS = ("malformed", "not a database", "database corruption")
#: The byte of a WAL database's ``-shm`` file its writer locks (sqlite.org/walformat.html, WAL_WRITE_LOCK)
_WAL_WRITE_LOCK_BYTE = 120


def way_out(where: str) -> str:
    """The way past a cache that cannot be used, named for both doors: the CLI's flags and the
    ``cache=`` argument the Python classes take."""
    return f"use {where} (--cache FILE; cache= in Python) or no cache (--no-cache; cache=None)"


class CacheAccessError(InvalidInputError):
    """The embedding cache file cannot be opened or written."""


class CacheWriteError(PoolragError, OSError):
    """The embedding cache's disk refused a write (full, quota, file size limit); not retried."""


class CacheBusyError(PoolragError, ConnectionError):
    """Another process held the embedding cache's write lock past the timeout (exit 3, as a store
    held by another writer)."""


def write_refused(exc: BaseException) -> str | None:
    """Why the disk refused a write, when ``exc`` says it did."""
    if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
        return _FULL_ERRNOS[exc.errno]
    code = getattr(exc, "sqlite_errorcode", None) if isinstance(exc, sqlite3.Error) else None
    if (code is not None and code & 0xFF == _FULL_CODE) or "database or disk is full" in str(exc):
        return "the disk is full"
    if code in _WRITE_IOERR_CODES:
        return "a write failed (a full disk or a file size limit)"
    return None


def is_corruption(exc: BaseException) -> bool:
    """Whether ``exc`` says the database file itself is damaged."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in _CORRUPT_CODES:
        return True
    text = str(exc).lower()
    return any(word in text for word in _CORRUPT_WORDS)


def _file_above(path: Path) -> Path | None:
    """The first of ``path``'s parents that exists as a file (so no folder can be made there)."""
    for parent in reversed(path.parents):
        if parent.is_file():
            return parent
    return None


def cache_access_error(
    path: Path, exc: BaseException, timeout: float = 30.0
) -> CacheAccessError | CacheWriteError | CacheBusyError | None:
    """The user-facing error for a cache that cannot be used; ``None`` for bugs."""
    if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc).lower():
        holder = held_by(f"{path}-shm", _WAL_WRITE_LOCK_BYTE)
        return CacheBusyError(
            f"the embedding cache {path} stayed locked by another process for {timeout:g} s"
            + (f" ({holder})" if holder else "")
            + f"; try again when it is done, or {way_out('another file')}"
        )
    refused = write_refused(exc)
    if refused is not None:
        return CacheWriteError(
            f"cannot write the embedding cache {path}: {refused}; free space there, or "
            + way_out("a file on another disk")
        )
    text = str(exc).lower()
    if isinstance(exc, OSError) or any(
        word in text for word in ("readonly", "read-only", "unable to open", "permission", "disk i/o")
    ):
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        if path.is_dir():
            reason = "it is a folder (give the file's path inside it)"
        elif (blocker := _file_above(path)) is not None:
            reason = f"{blocker} is a file, not a folder"
        return CacheAccessError(
            f"cannot use the embedding cache {path}: {reason}; " + way_out("a file in a writable folder")
        )
    return None
