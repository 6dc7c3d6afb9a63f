"""The files a pass over the paths given has met, so that a file reached twice (a symlink beside its
target, a folder given twice or inside another one given) is read, or counted, once.

Held as a set of resolved paths they cost ~450 bytes a file (the ``Path``, its parts list and their
strings) until the last file was read: 20,000 files held 9 MB, a million would hold 450 MB on top
of the reader's couple of 256 Ki pieces, twice over while the progress bar's count runs. They go to
a private temporary SQLite database instead (``sqlite3.connect("")``: SQLite's own file in the temp
folder, deleted when it is closed, its page cache bounded), as the stored ids and the checkpoint do.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path


class FilesMet:
    """Resolved file paths met so far, on disk; close it (or drop it) to delete the file."""

    def __init__(self) -> None:
        # a reading generator may be resumed on another thread than the one that started it
        self._db = sqlite3.connect("", isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=OFF")  # scratch: no journal, no fsync
        self._db.execute("PRAGMA synchronous=OFF")
        self._db.execute("CREATE TABLE met (path BLOB PRIMARY KEY) WITHOUT ROWID")

    def first_time(self, path: Path) -> bool:
        """Record ``path``; whether it was not met before. Bytes, as the file system has the name
        (a name that is not UTF-8 holds surrogates no SQLite text can)."""
        try:
            self._db.execute("INSERT INTO met VALUES (?)", (os.fsencode(path),))
        except sqlite3.IntegrityError:
            return False
        return True

    def close(self) -> None:
        self._db.close()
