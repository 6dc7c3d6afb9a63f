"""Checks on the folders local stores write to (Milvus Lite, Qdrant local mode, Qdrant Edge).

A folder that cannot be written is the user's to fix, and retrying cannot help: it must be one
immediate error naming the path, not five retries reported as "another process using it?". The
check writes and removes a probe file, because permission bits alone say nothing for root or on a
read-only mount. The error says that even a search writes there: an embedded store takes a
lock file (and Qdrant Edge loads its shard writable), which a user who only searches would not guess.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from poolrag.errors import InvalidInputError


class StorePathError(InvalidInputError):
    """A local store's folder is missing, not a folder, or cannot be written."""


def check_writable_folder(folder: Path, what: str, *, create: bool = False) -> None:
    """Raise :class:`StorePathError` unless files can be created in ``folder``."""
    try:
        if create:
            folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".poolrag-probe-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.EEXIST):  # mkdir through, or onto, a file
            raise StorePathError(
                f"cannot write {what} at {folder}: part of that path is a file, not a folder"
            ) from exc
        reason = exc.strerror or str(exc)
        cause = f"{_CAUSES[exc.errno]}: " if exc.errno in _CAUSES else ""
        raise StorePathError(
            f"cannot write {what} at {folder}: {reason} ({cause}choose a writable location; an "
            "embedded store writes its folder even to search, for its lock)"
        ) from exc


#: What an errno says about a folder that refused a probe file (others, e.g. a /proc path, say nothing).
_CAUSES = {
    errno.EACCES: "a permission problem",
    errno.EPERM: "a permission problem",
    errno.EROFS: "a read-only file system",
}
