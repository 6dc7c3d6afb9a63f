"""The ingestion checkpoint: which documents a run has fully written, so a killed run resumes.

A document is recorded only after all its chunks are upserted and its stale chunks deleted, each
batch's documents in one SQLite transaction (journalled and synced), so after ``kill -9`` the
checkpoint never claims more than the database holds. Chunk ids are deterministic, so even work done
after the last save is recognised on resume (the store already has those ids) and not repeated.

The done documents live in the file, not in memory, and a save adds only the batch's: a JSON file
rewritten and synced whole after every batch slowed a 200,000-document JSONL ingest from 295 to 91
documents/s by its 80,000th (each save a copy of every document done, 17 MB there) and held a
dict entry per document.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from poolrag.errors import InvalidInputError
from poolrag.ingest.stored_ids import process_alive

logger = logging.getLogger(__name__)

VERSION = 2  # 1: one JSON object rewritten per save

#: What a poolrag before VERSION 2 left in the default folder: ``<digest>.json`` and, of a killed
#: run, ``.<digest>.json.<pid>.stored-ids.sqlite`` (or ``.tmp``, a save cut short).
_OLD_CHECKPOINT = re.compile(r"[0-9a-f]{24}\.json")
_OLD_SCRATCH = re.compile(r"\.([0-9a-f]{24}\.json)\.(\d+)\.(?:stored-ids\.sqlite|tmp|probe)")


def default_checkpoint_path(cache_dir: Path, run_key: dict[str, Any]) -> Path:
    """One checkpoint per (store location, collection, model, dimension) under the cache folder."""
    digest = hashlib.sha256(_run_json(run_key).encode()).hexdigest()[:24]
    return cache_dir / "checkpoints" / f"{digest}.sqlite"


class Checkpoint:
    """Documents done (``source -> its version and the digest of the chunk ids it was stored as``,
    what the driver compares), in a SQLite file created at the first save."""

    def __init__(self, path: Path, run_key: dict[str, Any]) -> None:
        self.path = Path(path)
        self.run_key = run_key
        self.resumed = False
        self._db: sqlite3.Connection | None = None

    @classmethod
    def open(cls, path: Path, run_key: dict[str, Any]) -> Checkpoint:
        """Open the checkpoint of an interrupted run with the same ``run_key``, else start empty."""
        checkpoint = cls(path, run_key)
        checkpoint.check_writable()
        if not checkpoint.path.exists():
            return checkpoint
        try:
            db = sqlite3.connect(checkpoint.path)
            try:
                found = dict(db.execute("SELECT key, value FROM meta"))
                count = db.execute("SELECT COUNT(*) FROM done").fetchone()[0]
            except sqlite3.Error:
                db.close()
                raise
        except sqlite3.Error as exc:
            logger.warning("ignoring unreadable checkpoint %s (%s); starting over", path, exc)
            checkpoint.forget()
            return checkpoint
        checkpoint._db = db
        if found.get("version") != str(VERSION) or found.get("run") != _run_json(run_key):
            logger.warning("checkpoint %s belongs to another run; starting over", path)
            checkpoint.forget()
            return checkpoint
        checkpoint.resumed = True
        logger.info("resuming from checkpoint %s: %d documents already done", path, count)
        return checkpoint

    def check_writable(self) -> None:
        """Fail before any work when the checkpoint could not be saved later."""
        probe = self.path.with_name(f".{self.path.name}.{os.getpid()}.probe")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            probe.touch()
            probe.unlink()
        except OSError as exc:
            raise _unwritable(self.path, exc) from exc

    def forget(self) -> None:
        """Start over: the database the interrupted run wrote to no longer holds its work."""
        self.remove()
        self.resumed = False

    def names(self, source: str) -> bool:
        """Whether the interrupted run finished ``source`` at all (at whatever version)."""
        return self._record(source) is not None

    def is_done(self, source: str, digest: str) -> bool:
        return self._record(source) == digest

    def _record(self, source: str) -> str | None:
        if not self.resumed or self._db is None:  # a run's own documents are never asked again
            return None
        row = self._db.execute("SELECT record FROM done WHERE source = ?", (source,)).fetchone()
        return None if row is None else row[0]

    def mark_done(self, items: Mapping[str, str]) -> None:
        """Record ``items`` in one transaction: a save costs the batch, not every document done."""
        if not items:
            return
        try:
            db = self._db if self._db is not None else self._create()
            with db:
                db.executemany("INSERT OR REPLACE INTO done VALUES (?, ?)", items.items())
        except (OSError, sqlite3.Error) as exc:
            raise _unwritable(self.path, exc) from exc

    def _create(self) -> sqlite3.Connection:
        """An empty checkpoint, made aside and renamed: a reader never meets a file without tables."""
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp.unlink(missing_ok=True)
        db = sqlite3.connect(tmp)
        try:
            with db:
                db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                db.execute("CREATE TABLE done (source TEXT PRIMARY KEY, record TEXT NOT NULL) WITHOUT ROWID")
                rows = [("version", str(VERSION)), ("run", _run_json(self.run_key))]
                db.executemany("INSERT INTO meta VALUES (?, ?)", rows)
        finally:
            db.close()
        os.replace(tmp, self.path)
        db = sqlite3.connect(self.path)
        db.execute("PRAGMA synchronous=FULL")  # a commit reaches the disk before the next batch
        self._db = db
        return db

    def remove(self) -> None:
        """A run that finished needs no checkpoint."""
        if self._db is not None:
            self._db.close()
            self._db = None
        self.path.unlink(missing_ok=True)
        Path(f"{self.path}-journal").unlink(missing_ok=True)


def checkpointed(path: str | Path) -> dict[str, str]:
    """The documents a checkpoint file records as done (source -> record); empty where none is."""
    if not Path(path).exists():
        return {}
    db = sqlite3.connect(path)  # not read-only: it rolls back a transaction a killed run left
    try:
        return dict(db.execute("SELECT source, record FROM done"))
    finally:
        db.close()


def remove_old_checkpoints(folder: Path) -> None:
    """Remove the JSON checkpoints (and their scratch files) a poolrag before VERSION 2 left in the
    default checkpoint ``folder``: this one names its checkpoints ``<digest>.sqlite`` and never reads
    them, so no run's cleanup ever matched them and they stayed for good. A file of a process still
    running (an older poolrag ingesting now) is kept, with the checkpoint it belongs to."""
    try:
        names = [path.name for path in folder.iterdir()]
    except OSError:
        return
    in_use: set[str] = set()
    leftovers: list[str] = []
    for name in names:
        if (scratch := _OLD_SCRATCH.fullmatch(name)) is not None:
            pid = int(scratch[2])
            if pid == os.getpid() or process_alive(pid):
                in_use.add(scratch[1])
            else:
                leftovers.append(name)
    leftovers += [name for name in names if _OLD_CHECKPOINT.fullmatch(name) and name not in in_use]
    removed = 0
    for name in leftovers:
        try:
            (folder / name).unlink()
            removed += 1
        except OSError:  # gone already, or not ours to remove: nothing this run needs
            pass
    if removed:
        logger.info(
            "removed %d file%s of checkpoints an older poolrag left in %s (a format no longer read)",
            removed,
            "" if removed == 1 else "s",
            folder,
        )


def _run_json(run_key: dict[str, Any]) -> str:
    return json.dumps(run_key, sort_keys=True)


def _unwritable(path: Path, exc: OSError | sqlite3.Error) -> InvalidInputError:
    why = getattr(exc, "strerror", None) or str(exc)  # an OSError's strerror names no path
    return InvalidInputError(
        f"cannot write the checkpoint {path}: {why}; pass --checkpoint FILE in a writable folder"
    )
