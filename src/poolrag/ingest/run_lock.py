"""One ingest run at a time per checkpoint, across processes.

A checkpoint is named after the store, collection, model and chunking, not after the process, so
two ``poolrag ingest`` runs into the same collection of a database server (started twice by
mistake, or a second terminal) shared it: the second took the first's progress for an interrupted
run's, and whichever ended first deleted the file the other was still recording into (the one that
found the collection empty deleted it at its start), so the survivor, killed later, resumed from
nothing. A local store refuses a second process itself; a server does not. So the driver holds an
advisory lock on a file beside the checkpoint for the length of a run, and a second run is refused
in one line naming the process that holds it (:class:`~poolrag.file_lock.FileLock`: a ``kill -9``
never leaves a run locked out; on Windows, without ``flock``, runs go unguarded).
"""

from __future__ import annotations

import logging
from pathlib import Path

from poolrag.errors import PoolragError
from poolrag.file_lock import FileLock
from poolrag.lock_holders import held_by

logger = logging.getLogger(__name__)


class IngestRunningError(PoolragError, ConnectionError):
    """Another run holds the checkpoint (exit 3 in the CLI, as a store another process holds)."""


def run_lock_path(checkpoint: Path) -> Path:
    """The lock file of the runs recorded in ``checkpoint``: hidden, beside it."""
    return checkpoint.with_name(f".{checkpoint.name}.lock")


class RunLock:
    """An exclusive lock (:class:`~poolrag.file_lock.FileLock`) on :func:`run_lock_path`, taken
    without waiting."""

    def __init__(self, checkpoint: Path, what: str) -> None:
        self.checkpoint = checkpoint
        self.path = run_lock_path(checkpoint)
        self._what = what  # "qdrant http://db:6333/docs", for the refusal
        self._lock = FileLock(self.path)

    def acquire(self) -> RunLock:
        """Take the lock, or raise :class:`IngestRunningError`. Where it cannot be taken (another
        user's lock file a killed run left in a shared folder, a file system without locks) the run
        goes unguarded, as before there were locks."""
        try:
            taken = self._lock.try_acquire()
        except OSError as exc:
            logger.debug("no lock on %s (%s); a second run at once is not refused", self.path, exc)
            return self
        if not taken:
            raise self._refusal()
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
        self._lock.release(remove=True)
