"""A run's scratch SQLite databases (the files a reading pass met, the ids a collection held) when
the disk under them refuses a write. The reading pass's lives in SQLite's own temp folder, and a
sort (an index built over the stored ids) spills there too: a small ``/tmp`` (a container's
tmpfs, a Kubernetes ``emptyDir`` with a size limit) filled by a large corpus ended ``poolrag
ingest`` with a ``sqlite3.OperationalError: database or disk is full`` traceback that named no
folder and no way out."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator

from poolrag.cache.recovery import write_refused
from poolrag.errors import PoolragError

#: where SQLite puts its temporary files (the unix VFS's order), said to the user
SQLITE_TEMP_FOLDERS = "$SQLITE_TMPDIR, else $TMPDIR, else /var/tmp, /usr/tmp, /tmp or the working folder"


class ScratchSpaceError(PoolragError, RuntimeError):
    """The disk under a run's scratch database refused a write (full, quota, size limit); nothing
    stored is lost, and a re-run resumes from the checkpoint. Not an ``OSError``: a reader takes
    those as one unreadable file to leave out, and the run went on without the rest of it."""


@contextlib.contextmanager
def scratch_writes(what: str) -> Iterator[None]:
    """Turn a full disk met while writing ``what`` into one :class:`ScratchSpaceError` naming the
    temp folder SQLite used and the variable that moves it."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        reason = write_refused(exc)
        if reason is None:
            raise
        raise ScratchSpaceError(
            f"cannot write {what}: {reason}; SQLite's scratch files go to {SQLITE_TEMP_FOLDERS}: set "
            "SQLITE_TMPDIR to a folder with room"
        ) from exc
