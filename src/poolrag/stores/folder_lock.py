"""One process at a time on a Qdrant Edge shard's folder.

An edge shard locks its write-ahead log, but a second process that *loads* the shard (a ``poolrag
search`` beside a running ingest) touches the shard's other files before it reaches that lock and
fails there: the ingest then died mid-run with Qdrant's "tracker journal is shorter than expected"
(measured, twice). So the store holds an advisory lock on a file next to the shard for as long as
the shard is open, taken before any shard file is read; a second opener is refused as the WAL lock
would refuse it (retried, then one line), and the holder's files are never touched.
"""

from __future__ import annotations

from pathlib import Path

from poolrag.file_lock import FileLock
from poolrag.lock_holders import held_by

LOCK_FILE = ".poolrag.lock"


class FolderInUseError(OSError):
    """Another process holds the folder's lock."""


class FolderLock:
    """An exclusive lock (:class:`~poolrag.file_lock.FileLock`) on ``folder/.poolrag.lock``,
    released by :meth:`release` or when the process ends."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / LOCK_FILE
        self._lock = FileLock(self.path)

    def acquire(self) -> FolderLock:
        if not self._lock.try_acquire():
            holder = held_by(self.path)
            raise FolderInUseError(
                f"{self.path.parent} is open in another process" + (f" ({holder})" if holder else "")
            )
        return self

    def release(self) -> None:
        self._lock.release()
