"""Where poolrag keeps its files on disk: one rule for the embedding cache, checkpoints and compiled
graphs, so ``POOLRAG_CACHE_DIR`` moves all of them together."""

from __future__ import annotations

import atexit
import functools
import logging
import os
import secrets
import shutil
import stat
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)


def poolrag_cache_dir() -> Path:
    """``$POOLRAG_CACHE_DIR``, else ``poolrag`` under ``$XDG_CACHE_HOME`` or ``~/.cache``; for a
    user with no home (no ``$HOME`` and no passwd entry: a container run under an arbitrary uid),
    ``poolrag-cache-UID`` in the temp folder, as torch's compile cache, rather than a
    ``RuntimeError`` from every command (the help texts name this folder); there too when the
    default cannot be made (``HOME=/``). That folder is in a place every user can write, so see
    :func:`_private_temp_folder`."""
    root = os.environ.get("POOLRAG_CACHE_DIR")
    if root:
        return Path(root).expanduser()  # a quoted "~/x" (an env file, a Dockerfile) is not expanded
    xdg = os.environ.get("XDG_CACHE_HOME")
    home = os.path.expanduser("~")
    if not xdg and home == "~":
        # no writable temp folder either: a name, so that only what writes there fails, naming
        # its flag (--cache, --checkpoint), not every command as its parser is built
        return _temp_cache_folder() or Path(os.environ.get("TMPDIR") or "/tmp") / _temp_name()
    default = Path(xdg) / "poolrag" if xdg else Path(home) / ".cache" / "poolrag"
    return default if _can_hold(default) else _temp_instead_of(default)


def _temp_name() -> str:
    return f"poolrag-cache-{os.getuid()}"


def _temp_cache_folder() -> Path | None:
    """The private folder in the temp folder; ``None`` where no temp folder can be written."""
    try:
        temp = tempfile.gettempdir()
    except OSError:  # Python's "No usable temporary directory found": a read-only everything
        return None
    return _private_temp_folder(Path(temp) / _temp_name())


def _can_hold(folder: Path) -> bool:
    """Whether ``folder`` is there (read-only too: a cache baked into an image is read) or can be
    made: its nearest existing parent is a folder this user may write in."""
    for place in (folder, *folder.parents):
        try:
            info = place.stat()
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:  # a home this user may not enter (HOME=/root kept under --user 12345)
            return False
        if not stat.S_ISDIR(info.st_mode):
            return False
        return place == folder or os.access(place, os.W_OK | os.X_OK)
    return False


@functools.cache  # said once a process, not at each of the cache, checkpoint and verdict lookups
def _temp_instead_of(default: Path) -> Path:
    """The temp folder's cache for a user whose default cannot be made there: ``HOME=/`` on a
    read-only root, as OpenShift gives an arbitrary uid, failed every ``poolrag ingest``."""
    folder = _temp_cache_folder()
    if folder is None:
        return default  # what writes there names its flag (--cache, --checkpoint)
    logger.warning(
        "cannot make poolrag's cache folder %s; using %s (set POOLRAG_CACHE_DIR to a writable "
        "folder to keep the cache elsewhere)",
        default,
        folder,
    )
    return folder


@functools.cache  # one fresh folder per process, not one per call
def _private_temp_folder(folder: Path) -> Path:
    """``folder``, made now (mode 0700) so the name is this user's before anyone else takes it;
    when another user already has it (or it is a link), a fresh private folder for this process,
    removed as it ends: the embedding cache and the tuned verdicts read from it decide what vectors
    come back."""
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = folder.lstat()
    except OSError as exc:
        reason = str(exc)
    else:
        if not stat.S_ISDIR(info.st_mode):
            reason = "not a folder"
        elif info.st_uid != os.getuid():
            reason = "it belongs to another user"
        elif info.st_mode & 0o022:
            reason = "others can write to it"
        else:
            return folder
    fresh = Path(tempfile.mkdtemp(prefix=f"{folder.name}-"))
    # no later run finds it: left behind, each run's embedding cache would fill the temp folder
    atexit.register(_remove_at_exit, fresh, os.getpid())
    logger.warning("not using %s as poolrag's cache (%s); using %s for this run", folder, reason, fresh)
    return fresh


def _remove_at_exit(folder: Path, owner: int) -> None:
    """Remove ``folder`` as the process that made it ends (not a forked child ending before it)."""
    if os.getpid() == owner:
        shutil.rmtree(folder, ignore_errors=True)


def partial_path(path: Path) -> Path:
    """A name beside ``path`` to write it under before the rename, this writer's alone: the process
    id is not (containers sharing one cache folder each run as PID 1, threads share theirs), and two
    writers of one name truncate each other's file and fail each other's rename."""
    return path.with_suffix(f".{os.getpid()}-{secrets.token_hex(4)}.partial")
