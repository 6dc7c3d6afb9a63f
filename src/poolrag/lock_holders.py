"""Which process holds a lock on a file, for the errors that say a store or cache is in use.

A store refused because another process has it open (Milvus Lite's ``LOCK``, Qdrant local mode's
``.lock``, a Qdrant Edge shard's ``.poolrag.lock``) is only closed by finding that process: a
stuck notebook, a forgotten ``poolrag serve`` or ingest in another terminal. Linux lists every
flock and POSIX lock in ``/proc/locks`` with the file's device and inode and the owner's pid, and
the owner's command line is in ``/proc/<pid>/cmdline``; it is shown shortened, with the values of
secret-looking options (``--api-key``, tokens, passwords) and URL passwords replaced by ``***``.

Where the holder cannot be found (not Linux, no ``/proc``, a lock type not listed, an owner in
another pid namespace, which the kernel shows as pid 0, a file system whose locks name another
device than ``stat`` does) the answer is empty and the error reads as it did: the lookup never
fails its caller.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
from pathlib import Path

from poolrag.printable import printable

logger = logging.getLogger(__name__)

PROC_LOCKS = "/proc/locks"
#: How much of a holder's command line is shown
SHOWN_CHARS = 120
#: An option whose value is a secret: ``--api-key``, ``--token``, ``--hf_token``, ``--password``
_SECRET_OPTION = re.compile(r"(?:^|[-_])(?:key|token|password|passwd|secret|credentials?)$", re.IGNORECASE)
_URL_PASSWORD = re.compile(r"(://[^/:@\s]*:)[^/@\s]*@")


def lock_holders(path: str | os.PathLike[str], byte: int | None = None) -> list[int]:
    """The pids holding a flock or POSIX lock on ``path`` (covering offset ``byte`` when given),
    in ``/proc/locks`` order; empty where that cannot be read."""
    try:
        info = os.stat(path)
        with open(PROC_LOCKS, encoding="ascii", errors="replace") as listing:
            lines = listing.read().splitlines()
    except OSError:
        return []
    wanted = (os.major(info.st_dev), os.minor(info.st_dev), info.st_ino)
    pids: list[int] = []
    for line in lines:
        # "1: FLOCK  ADVISORY  WRITE 28396 fe:00:2842906 0 EOF"; "1: -> ..." is a waiter, not a holder
        fields = line.split()
        if len(fields) < 8 or fields[1] == "->":
            continue
        try:
            major, minor, inode = fields[5].split(":")
            pid, start = int(fields[4]), int(fields[6])
            end = None if fields[7] == "EOF" else int(fields[7])
            where = (int(major, 16), int(minor, 16), int(inode))
        except ValueError:
            continue
        if where != wanted or pid <= 0 or pid in pids:  # 0: another pid namespace; -1: an OFD lock
            continue
        if byte is None or (start <= byte and (end is None or byte <= end)):
            pids.append(pid)
    return pids


def shown_command(argv: list[str]) -> str:
    """A command line as one short line, secrets left out: ``poolrag ingest docs --api-key ***``."""
    if len(argv) > 1 and os.path.basename(argv[0]).startswith("python") and not argv[1].startswith("-"):
        argv = argv[1:]  # a console script: "/venv/bin/python /venv/bin/poolrag ..." is "poolrag ..."
    shown = [os.path.basename(argv[0])] if argv else []
    hide_next = False
    for arg in argv[1:]:
        name, equals, _value = arg.partition("=")
        if hide_next:
            arg, hide_next = "***", False
        elif arg.startswith("-") and _SECRET_OPTION.search(name.lstrip("-")):
            arg = f"{name}=***" if equals else arg
            hide_next = not equals
        shown.append(_URL_PASSWORD.sub(r"\1***@", arg))
    quoted = (shlex.quote(arg) if not arg or any(c.isspace() for c in arg) else arg for arg in shown)
    line = printable(" ".join(" ".join(quoted).split()))  # a -c script's lines as one
    return line if len(line) <= SHOWN_CHARS else line[: SHOWN_CHARS - 1] + "…"


def _command_of(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # gone since, or not ours to read
        return None
    argv = [arg.decode(errors="surrogateescape") for arg in raw.split(b"\0")[:-1] if arg] if raw else []
    return shown_command(argv) if argv else None


def held_by(path: str | os.PathLike[str], byte: int | None = None) -> str:
    """``"held by pid 1234 (poolrag ingest docs --store qdrant)"``, or ``""`` where no holder of a
    lock on ``path`` can be found."""
    try:
        named = []
        for pid in lock_holders(path, byte):
            command = "this process" if pid == os.getpid() else _command_of(pid)
            named.append(f"pid {pid} ({command})" if command else f"pid {pid}")
    except Exception:  # never the reason an error message fails to be made
        logger.debug("could not find the holder of %s", path, exc_info=True)
        return ""
    return f"held by {', '.join(named)}" if named else ""
