"""The chunk ids a collection held when an ingest run started, on disk for the length of the run.

A run needs them three ways: to skip chunks already stored, to find the stale chunks of a changed
document, and (``prune``) to find chunks of sources it never saw. Held in Python dicts and sets that
is ~300 bytes per stored chunk, so a re-run over a 500 MB corpus (~385,000 chunks) would start over
100 MB up before reading a line. In a SQLite file next to the checkpoint, filled page by page from
the store, it costs SQLite's bounded page cache whatever the collection's size. The file is scratch:
written fresh by every run (its name carries the process id, so two runs never share one) and removed
when the run ends; one left by a killed run is removed by the next run in that folder.
"""

from __future__ import annotations

import glob
import logging
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from poolrag.errors import InvalidInputError

logger = logging.getLogger(__name__)

_SUFFIX = ".stored-ids.sqlite"
_PAGE = 1000  # ids per delete call when pruning


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


class StoredIds:
    """Stored chunk ids and their sources; which of them this run produced again; the sources seen."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._remove_leftovers()
        path.unlink(missing_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None)
        # Scratch data rebuilt by every run: no journal, no fsync.
        self._db.execute("PRAGMA journal_mode=OFF")
        self._db.execute("PRAGMA synchronous=OFF")
        self._db.execute(
            "CREATE TABLE stored (id TEXT PRIMARY KEY, source TEXT NOT NULL, kept INTEGER NOT NULL DEFAULT 0)"
            " WITHOUT ROWID"
        )
        self._db.execute("CREATE TABLE seen (source TEXT PRIMARY KEY) WITHOUT ROWID")
        self._empty = True

    @classmethod
    def beside(cls, checkpoint_path: Path) -> StoredIds:
        """A fresh ledger in the checkpoint's folder (already checked writable)."""
        name = f".{checkpoint_path.name}.{os.getpid()}{_SUFFIX}"
        return cls(checkpoint_path.with_name(name))

    def _remove_leftovers(self) -> None:
        """Ledgers of runs that were killed (their process is gone)."""
        stem = self.path.name.rsplit(".", 3)[0]  # ".<checkpoint name>"
        for path in self.path.parent.glob(f"{glob.escape(stem)}.*{_SUFFIX}"):
            pid = path.name[len(stem) + 1 : -len(_SUFFIX)]
            if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
                path.unlink(missing_ok=True)

    def fill(self, scan: Callable[[Callable[[Iterable[tuple[str, str]]], None]], None]) -> None:
        """Load the collection's ``(id, source)`` pairs through ``scan`` (a store's ``scan_sources``),
        which hands them over a page at a time; a scan retried from the start adds nothing twice."""

        def consume(page: Iterable[tuple[str, str]]) -> None:
            self._db.executemany("INSERT OR REPLACE INTO stored (id, source) VALUES (?, ?)", page)

        self._db.execute("BEGIN")
        scan(consume)
        self._db.execute("COMMIT")
        self._db.execute("CREATE INDEX by_source ON stored (source)")
        self._empty = self._db.execute("SELECT 1 FROM stored LIMIT 1").fetchone() is None

    def see(self, source: str) -> None:
        """Record a document's source; a second document with it is the caller's mistake."""
        try:
            self._db.execute("INSERT INTO seen VALUES (?)", (source,))
        except sqlite3.IntegrityError:
            raise InvalidInputError(
                f"two documents share the source {source!r}; sources must be unique"
            ) from None

    @property
    def is_empty(self) -> bool:
        """Whether the collection held no chunk when the run started."""
        return self._empty

    def holds(self, source: str) -> bool:
        """Whether the collection has a chunk of ``source``."""
        if self._empty:
            return False
        return (
            self._db.execute("SELECT 1 FROM stored WHERE source = ? LIMIT 1", (source,)).fetchone()
            is not None
        )

    def keep(self, chunk_id: str) -> bool:
        """Whether ``chunk_id`` is stored already; if so it is not stale (ids include the source)."""
        if self._empty:
            return False
        return self._db.execute("UPDATE stored SET kept = 1 WHERE id = ?", (chunk_id,)).rowcount > 0

    def stale(self, source: str) -> list[str]:
        """Stored ids of ``source`` that its new version did not produce."""
        if self._empty:
            return []
        rows = self._db.execute("SELECT id FROM stored WHERE source = ? AND kept = 0", (source,))
        return [cid for (cid,) in rows]

    def orphans(self, keep: Callable[[str], bool]) -> Iterator[list[str]]:
        """Pages of stored ids whose source no document of this run had, except where ``keep(source)``."""
        rows = self._db.execute("SELECT id, source FROM stored WHERE source NOT IN (SELECT source FROM seen)")
        while page := rows.fetchmany(_PAGE):
            ids = [cid for cid, source in page if not keep(source)]
            if ids:
                yield ids

    def ids(self) -> Iterator[str]:
        """Every stored id (a Ray run ships them to its workers, which skip them)."""
        for (cid,) in self._db.execute("SELECT id FROM stored"):
            yield cid

    def close(self) -> None:
        """Close and remove the file."""
        self._db.close()
        try:
            self.path.unlink(missing_ok=True)
        except OSError as exc:  # a leftover is removed by the next run; the run itself succeeded
            logger.warning("could not remove %s: %s", self.path, exc)
