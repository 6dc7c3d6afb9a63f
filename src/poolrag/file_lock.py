"""An exclusive advisory lock on a file, which no holder outlives.

Three things in poolrag run in one process at a time: an ingest run per checkpoint
(:mod:`poolrag.ingest.run_lock`), a Qdrant Edge shard's folder (:mod:`poolrag.stores.folder_lock`)
and a model's speed measurement on a machine (:mod:`poolrag.core.measuring_turn`). Each holds a
``flock`` on a file: the kernel drops it when its holder's process ends, however it ends, so a
``kill -9`` never leaves anything locked. A holder may remove the file as it lets go (no litter);
a taker then checks that the file it locked is still the one at the path, since a file removed as
it was opened locks nothing the next process will see, and takes the new one. Windows has no
``flock``: there every lock is taken at once and holds nothing, rather than each caller failing to
import.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import IO

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]


class FileLock:
    """An exclusive ``flock`` on ``path``, taken without waiting. Two opens of one file conflict
    even in one process, as two processes' do."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[bytes] | None = None

    @property
    def held(self) -> bool:
        return self._file is not None

    def try_acquire(self) -> bool:
        """True once held (or where the system has no ``flock``), False while another holds it.

        Raises:
            OSError: the file cannot be opened, or its file system cannot lock it.
        """
        if fcntl is None:
            return True
        while self._file is None:
            file = self.path.open("ab")
            try:
                fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                file.close()
                return False
            except OSError:
                file.close()
                raise
            if _same_file(file, self.path):
                self._file = file
            else:  # removed by the holder that let go as this one opened it
                file.close()
        return True

    def release(self, remove: bool = False) -> None:
        """Let go (idempotent); ``remove`` deletes the file first, so none is left behind."""
        if self._file is None:
            return
        if remove:
            with contextlib.suppress(OSError):  # already gone: the next taker checks the inode
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
