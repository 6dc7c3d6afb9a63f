"""One ingest run at a time per checkpoint, across processes.

A checkpoint is named after the store, collection, model and chunking, not after the process, so
two ``poolrag ingest`` runs into the same collection of a database server (started twice by
mistake, or a second terminal) shared it: the second took the first's progress for an interrupted
run's, and whichever ended first deleted the file the other was still recording into (the one that
found the collection empty deleted it at its start), so the survivor, killed later, resumed from
nothing. A local store refuses a second process itself; a server does not. So the driver holds an
advisory lock on a file beside the checkpoint for the length of a run, and a second run is refused
in one line naming the process that holds it. The kernel drops the lock when its holder dies, so a
``kill -9`` never leaves a run locked out. Windows has no ``flock``: runs there go unguarded, as on
a file system without locks, rather than every ingest (and the CLI's error report) failing to import.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import IO

from poolrag.errors import PoolragError
from poolrag.lock_holders import held_by

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)


class IngestRunningError(PoolragError, ConnectionError):
    """Another run holds the checkpoint (exit 3 in the CLI, as a store another process holds)."""


def run_lock_path(checkpoint: Path) -> Path:
    """The lock file of the runs recorded in ``checkpoint``: hidden, beside it."""
    return checkpoint.with_name(f".{checkpoint.name}.lock")


class RunLock:
    """An exclusive ``flock`` on :func:`run_lock_path`, taken without waiting."""

    def __init__(self, checkpoint: Path, what: str) -> None:
        self.checkpoint = checkpoint
        self.path = run_lock_path(checkpoint)
        self._what = what  # "qdrant http://db:6333/docs", for the refusal
        self._file: IO[bytes] | None = None

    def acquire(self) -> RunLock:
        """Take the lock, or raise :class:`IngestRunningError`. A lock file the previous run removed
        as this one opened it is not the one the next run will lock: locked, it is let go and the
        file now at the path is locked instead."""
        if fcntl is None:
            logger.debug("no flock here; a second run on %s at once is not refused", self.checkpoint)
            return self
        while self._file is None:
            try:
                file = self.path.open("ab")
            except OSError as exc:  # another user's lock file a killed run left in a shared folder
                logger.debug("no lock on %s (%s); a second run at once is not refused", self.path, exc)
                return self
            try:
                fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                file.close()
                raise self._refusal() from None
            except OSError as exc:  # a file system without locks: run as before there were any
                logger.debug("no lock on %s (%s); a second run at once is not refused", self.path, exc)
                file.close()
                return self
            if _same_file(file, self.path):
                self._file = file
            else:
                file.close()
        return self

    def _refusal(self) -> IngestRunningError:
        holder = held_by(self.path)
        return IngestRunningError(
            f"another ingest into {self._what} is running"
            + (f" ({holder})" if holder else "")
            + f" and recording its progress in {self.checkpoint}; wait for it to end, or give this run "
            "its own --checkpoint FILE"
        )

    def release(self) -> None:
        """Remove the lock file and let go (idempotent): a finished or failed run leaves none behind."""
        if self._file is None:
            return
        with contextlib.suppress(OSError):  # removed while held: the next opener checks the inode
            self.path.unlink(missing_ok=True)
        self._file.close()  # closing the descriptor drops the flock
        self._file = None


def _same_file(file: IO[bytes], path: Path) -> bool:
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(file.fileno())
    return (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)
