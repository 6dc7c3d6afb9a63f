"""The ingestion checkpoint: which documents a run has fully written, so a killed run resumes.

A document is recorded only after all its chunks are upserted and its stale chunks deleted, and
the file is replaced atomically (write, fsync, rename), so after ``kill -9`` the checkpoint never
claims more than the database holds. Chunk ids are deterministic, so even work done after the
last save is recognised on resume (the store already has those ids) and not repeated.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from poolrag.errors import InvalidInputError

logger = logging.getLogger(__name__)

VERSION = 1


def default_checkpoint_path(cache_dir: Path, run_key: dict[str, Any]) -> Path:
    """One checkpoint per (store location, collection, model, dimension) under the cache folder."""
    digest = hashlib.sha256(json.dumps(run_key, sort_keys=True).encode()).hexdigest()[:24]
    return cache_dir / "checkpoints" / f"{digest}.json"


class Checkpoint:
    """Documents done in the current run (``source -> its version and the digest of the chunk ids
    it was stored as``, what the driver compares), persisted atomically."""

    def __init__(self, path: Path, run_key: dict[str, Any]) -> None:
        self.path = Path(path)
        self.run_key = run_key
        self.done: dict[str, str] = {}
        self.resumed = False

    @classmethod
    def open(cls, path: Path, run_key: dict[str, Any]) -> Checkpoint:
        """Load the checkpoint of an interrupted run with the same ``run_key``, else start empty."""
        checkpoint = cls(path, run_key)
        checkpoint.check_writable()
        try:
            data = json.loads(checkpoint.path.read_text())
        except FileNotFoundError:
            return checkpoint
        except (OSError, ValueError) as exc:
            logger.warning("ignoring unreadable checkpoint %s (%s); starting over", path, exc)
            return checkpoint
        if not isinstance(data, dict) or data.get("version") != VERSION or data.get("run") != run_key:
            logger.warning("checkpoint %s belongs to another run; starting over", path)
            return checkpoint
        done = data.get("done", {})
        if not isinstance(done, dict) or not all(isinstance(v, str) for v in done.values()):
            logger.warning("ignoring malformed checkpoint %s; starting over", path)
            return checkpoint
        checkpoint.done = {str(k): v for k, v in done.items()}
        checkpoint.resumed = True
        logger.info("resuming from checkpoint %s: %d documents already done", path, len(checkpoint.done))
        return checkpoint

    def check_writable(self) -> None:
        """Fail before any work when the checkpoint could not be saved later."""
        probe = self.path.with_name(f".{self.path.name}.{os.getpid()}.probe")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            probe.touch()
            probe.unlink()
        except OSError as exc:
            raise InvalidInputError(
                f"cannot write the checkpoint {self.path}: {exc.strerror or exc}; "
                "pass --checkpoint FILE in a writable folder"
            ) from exc

    def forget(self) -> None:
        """Start over: the database the interrupted run wrote to no longer holds its work."""
        self.done = {}
        self.resumed = False

    def names(self, source: str) -> bool:
        """Whether the interrupted run finished ``source`` at all (at whatever version)."""
        return source in self.done

    def is_done(self, source: str, digest: str) -> bool:
        return self.done.get(source) == digest

    def mark_done(self, items: dict[str, str]) -> None:
        self.done.update(items)
        self.save()

    def save(self) -> None:
        """Write the file atomically; a folder that cannot be written is the user's to fix."""
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with tmp.open("w") as handle:
                json.dump({"version": VERSION, "run": self.run_key, "done": self.done}, handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except OSError as exc:
            raise InvalidInputError(
                f"cannot write the checkpoint {self.path}: {exc.strerror or exc}; "
                "pass --checkpoint FILE in a writable folder"
            ) from exc

    def remove(self) -> None:
        """A run that finished needs no checkpoint."""
        self.path.unlink(missing_ok=True)
