"""What a reading pass has met, so that a file reached twice (a symlink beside its target, a folder
given twice or inside another one given) is read once and a record whose id repeats an earlier
one's is named with the line of the first, without one Python object per file or record.

Held in a set and a dict, the resolved paths cost ~450 bytes a file and a JSONL or CSV file's
record ids ~270 bytes a record, until the pass ended: 20,000 files held 9 MB, a million would hold
450 MB (and the progress bar's count as much again), and a BEIR corpus of 8.8 million passages
2.3 GB, beside the reader's couple of 256 Ki pieces. They go to a private temporary SQLite database
instead (``sqlite3.connect("")``: SQLite's own file in the temp folder, deleted when it is closed,
also after ``kill -9``), whose page cache is bounded, as the stored ids and the checkpoint do.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from poolrag.ingest.scratch_space import scratch_writes

#: what the error of a full temp folder names
_WHAT = "the list of files and records this run has read"


class FirstMet:
    """Keys met so far, each with the line it was first met on and whether it was named there (a
    record's id, not its line number); close it (or drop it) to delete the file."""

    def __init__(self) -> None:
        # a reading generator may be resumed on another thread than the one that started it
        self._db = sqlite3.connect("", isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=OFF")  # scratch: no journal, no fsync
        self._db.execute("PRAGMA synchronous=OFF")
        self._db.execute(
            "CREATE TABLE met (key BLOB PRIMARY KEY, line INTEGER NOT NULL, named INTEGER NOT NULL)"
            " WITHOUT ROWID"
        )

    def earlier(self, key: str, line: int = 0, named: bool = False) -> tuple[int, bool] | None:
        """Record ``key``, met on ``line``; ``None`` the first time, else where it was first met.
        Bytes, as a file name that is not UTF-8 holds surrogates no SQLite text can."""
        data = key.encode("utf-8", "surrogatepass")
        try:
            with scratch_writes(_WHAT):
                self._db.execute("INSERT INTO met VALUES (?, ?, ?)", (data, line, named))
        except sqlite3.IntegrityError:
            first_line, first_named = self._db.execute(
                "SELECT line, named FROM met WHERE key = ?", (data,)
            ).fetchone()
            return first_line, bool(first_named)
        return None

    def first_time(self, path: Path) -> bool:
        """Record a resolved file path; whether it was not met before."""
        return self.earlier(os.fsdecode(path)) is None

    def close(self) -> None:
        self._db.close()
