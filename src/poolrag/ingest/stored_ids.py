"""The chunk ids a collection held when an ingest run started, on disk for the length of the run.

A run needs them four ways: to skip chunks already stored, to find the chunks whose stored payload
(a record's fields, a page's title) is not the one this run would write, to find the stale chunks
of a changed document, and (``prune``) to find chunks of sources it never saw. A chunk's id names its
source, offset and text only (so upgrading poolrag keeps every stored id); its payload is compared
by a digest of what the store holds, computed from the payloads it hands over at the start of the run
(:func:`payload_digest`), so a collection written before the digest existed needs no rewrite.

Held in Python dicts and sets that is ~300 bytes per stored chunk, so a re-run over a 500 MB corpus
(~385,000 chunks) would start over 100 MB up before reading a line. In a SQLite file next to the
checkpoint, filled page by page from the store, it costs SQLite's bounded page cache whatever the
collection's size. The file is scratch: written fresh by every run (its name carries the process id,
so two runs never share one) and removed when the run ends; one left by a killed run is removed by
the next run in that folder.
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from poolrag.errors import InvalidInputError
from poolrag.ingest.headings import section_headings
from poolrag.ingest.scratch_space import scratch_writes

logger = logging.getLogger(__name__)

_SUFFIX = ".stored-ids.sqlite"
_PAGE = 1000  # ids per delete call when pruning


#: A number stores may hand back as a float (JSON) is compared as one past this size.
_EXACT_INT = 2**53


def _canonical(value: Any) -> Any:
    """``value`` as every store hands it back: tuples as lists, an integral float as an int, an
    integer too large for a double as the float it reads as."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        if isinstance(value, float) and not value.is_integer():
            return value
        return int(value) if abs(value) <= _EXACT_INT else float(value)
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return str(value)


def payload_digest(payload: Mapping[str, Any]) -> str:
    """A digest of a chunk's payload but its text (which its id names): equal for the payload a run
    would write and the one a store holds for it, whichever store."""
    fields = {str(k): _canonical(v) for k, v in payload.items() if k != "text"}
    data = json.dumps(fields, sort_keys=True, ensure_ascii=False, allow_nan=True)
    return hashlib.blake2b(data.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def payload_matches(stored: str | None, payload: Mapping[str, Any]) -> bool:
    """Whether a stored payload digest (``None``: the store gave none) is ``payload``'s, or that of
    ``payload`` as a poolrag before 4945b0e wrote it: without the ``headings`` the chunker now adds
    to a Markdown or RST chunk (its id, text and vector are unchanged), so upgrading rewrites (and,
    without a cache, re-embeds) none of a collection's chunks."""
    if stored is None or stored == payload_digest(payload):
        return True
    if "headings" not in payload or section_headings(str(payload.get("source", ""))) is None:
        return False  # a record's own "headings" field is the record's: a change to it is written
    return stored == payload_digest({k: v for k, v in payload.items() if k != "headings"})


class ChunkSet:
    """A digest of a set of chunk ids, whatever order they come in, in constant memory (a sum of
    their hashes): what a checkpoint records of a done document, so a resumed run can tell whether
    the collection still holds exactly the chunks that run stored for it."""

    _MODULUS = 1 << 128

    def __init__(self, ids: Iterable[str] = ()) -> None:
        self._total = 0
        self._count = 0
        for chunk_id in ids:
            self.add(chunk_id)

    def add(self, chunk_id: str) -> None:
        term = hashlib.blake2b(chunk_id.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        self._total = (self._total + int.from_bytes(term, "little")) % self._MODULUS
        self._count += 1

    def __len__(self) -> int:
        """How many ids were added (a resumed run counts a done document's stored chunks by it)."""
        return self._count

    @property
    def digest(self) -> str:
        return f"{self._total:032x}"


#: Pages of ``(chunk id, payload without its text)`` a store hands over (its ``scan_payloads``).
PayloadPages = Callable[[Iterable[tuple[str, Mapping[str, Any]]]], None]


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a scratch file named after it is in use)."""
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
            "CREATE TABLE stored (id TEXT PRIMARY KEY, source TEXT NOT NULL, kept INTEGER NOT NULL DEFAULT 0,"
            " digest TEXT) WITHOUT ROWID"
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
            if pid.isdigit() and int(pid) != os.getpid() and not process_alive(int(pid)):
                path.unlink(missing_ok=True)

    def fill(self, scan: Callable[[Callable[[Iterable[tuple[str, str]]], None]], None]) -> None:
        """Load the collection's ``(id, source)`` pairs through ``scan`` (a store's ``scan_sources``),
        which hands them over a page at a time; a scan retried from the start adds nothing twice.
        Their payloads are unknown, so :meth:`keep` takes each as the one the run would write."""

        def consume(page: Iterable[tuple[str, str]]) -> None:
            self._db.executemany("INSERT OR REPLACE INTO stored (id, source) VALUES (?, ?)", page)

        self._load(scan, consume)

    def fill_payloads(self, scan: Callable[[PayloadPages], None]) -> None:
        """Load the collection's ids, sources and payload digests through ``scan`` (a store's
        ``scan_payloads``: ``(id, payload without its text)`` a page at a time)."""

        def consume(page: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
            rows = [(cid, str(payload.get("source", "")), payload_digest(payload)) for cid, payload in page]
            self._db.executemany("INSERT OR REPLACE INTO stored (id, source, digest) VALUES (?, ?, ?)", rows)

        self._load(scan, consume)

    def _load(self, scan: Callable[[Any], None], consume: Callable[[Any], None]) -> None:
        # the rows go to this file's disk, the index's sort spills to SQLite's temp folder
        with scratch_writes(f"the ids the collection holds ({self.path})"):
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

    def chunks_of(self, source: str) -> ChunkSet:
        """The stored ids of ``source``, as a :class:`ChunkSet`."""
        rows = self._db.execute("SELECT id FROM stored WHERE source = ?", (source,))
        return ChunkSet(cid for (cid,) in rows)

    def keep(self, chunk_id: str, payload: Mapping[str, Any] | None = None) -> bool:
        """Whether ``chunk_id`` is stored already with ``payload`` (its text aside; ``None``: any),
        so it need not be written. A stored id is not stale either way (ids include the source):
        one stored with another payload is written again under the same id."""
        if self._empty:
            return False
        rows = self._db.execute(
            "UPDATE stored SET kept = 1 WHERE id = ? RETURNING digest", (chunk_id,)
        ).fetchall()
        if not rows:
            return False
        stored = rows[0][0]
        return payload is None or payload_matches(stored, payload)

    def digests(self) -> Iterator[tuple[str, str | None]]:
        """Every stored id and its payload digest (``None`` where the store gave no payload)."""
        yield from self._db.execute("SELECT id, digest FROM stored")

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

    def unseen_sources(self) -> Iterator[tuple[str, int]]:
        """Each stored source no document of this run had, in order, with its number of chunks."""
        yield from self._db.execute(
            "SELECT source, COUNT(*) FROM stored WHERE source NOT IN (SELECT source FROM seen)"
            " GROUP BY source ORDER BY source"
        )

    def close(self) -> None:
        """Close and remove the file."""
        self._db.close()
        try:
            self.path.unlink(missing_ok=True)
        except OSError as exc:  # a leftover is removed by the next run; the run itself succeeded
            logger.warning("could not remove %s: %s", self.path, exc)
