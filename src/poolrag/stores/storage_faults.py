"""Disk and permission faults of a local store, told apart from a database that is down.

A full disk, a file size limit, a read-only or unwritable folder cannot be waited out: the run
stops at once with one line naming the store's path and the cause (:class:`StoreWriteError`, exit
code 4 in the CLI), never a retry loop or a client library's traceback. Batches are idempotent
upserts and the checkpoint records only what the store acknowledged, so a re-run after the fault
is fixed resumes where the run stopped.
"""

from __future__ import annotations

import errno
import re

from poolrag.errors import PoolragError

#: errno values that mean the store's disk refused the write, and how to say so.
_ERRNO_CAUSES = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exhausted",
    errno.EFBIG: "a file size limit was reached",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EIO: "an I/O error on the disk",
}
#: What clients that hide the errno (SQLite under Qdrant's local mode, Milvus Lite's gRPC) say.
_MESSAGE_CAUSES = [
    (re.compile(r"no space left on device|database or disk is full", re.I), "the disk is full"),
    (re.compile(r"file too large", re.I), "a file size limit was reached"),
    (re.compile(r"read-only file system|readonly database", re.I), "the file system is read-only"),
    (re.compile(r"permission denied|operation not permitted", re.I), "permission denied"),
    (
        re.compile(r"disk i/o error", re.I),
        "a disk I/O error (a full disk, a file size limit or a read-only folder)",
    ),
]


class StoreWriteError(PoolragError, OSError):
    """The store's disk refused a write (full, size limit, read-only, permission); not retried."""


def storage_fault(exc: BaseException) -> str | None:
    """The cause, in words, when ``exc`` (or what it was raised from) is a disk or permission fault."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _ERRNO_CAUSES:
            return f"{_ERRNO_CAUSES[current.errno]} ({current.strerror or current})"
        text = str(current)
        for pattern, cause in _MESSAGE_CAUSES:
            if pattern.search(text):
                return cause
        current = current.__cause__ or current.__context__
    return None
