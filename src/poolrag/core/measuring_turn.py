"""One process measures a model's paths on a machine at a time.

``poolrag serve --workers 4`` starts four processes that load one model at once. Were each to
measure on its first load, four measurements would share the cores, each loading the other
candidate and timing on a machine the others keep busy, and the verdict that stayed (the last
written) would be measured under a load serving never sees. So a measurement holds a lock
(:class:`~poolrag.file_lock.FileLock`) on a file beside the verdict's; a process that finds it held
waits (serving on the default path, or before its load returns where it would measure before
serving) and then takes the verdict the holder saved. A holder that dies before saving one lets go
with its process, and the next in line measures. A cache folder that cannot hold the lock file
leaves measuring unguarded.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator

from poolrag.core.tune_verdicts import TuneKey
from poolrag.file_lock import FileLock
from poolrag.lock_holders import lock_holders

logger = logging.getLogger(__name__)

POLL_S = 0.5  # how often a waiting process looks whether the measuring one is done


@contextlib.contextmanager
def measuring_turn(key: TuneKey, wait: Callable[[], None], say: Callable[[str], None]) -> Iterator[bool]:
    """Hold ``key``'s turn to measure for the ``with`` block; yields True when another process held
    it first (its verdict may be on disk now). Before waiting, ``say`` is given a sentence naming
    the holder; ``wait`` is called between looks (it sleeps, and raises to give up)."""
    verdict = key.path()
    lock = FileLock(verdict.with_name(f".{verdict.stem}.measuring"))  # hidden, beside the verdict
    waited = False
    try:
        lock.path.parent.mkdir(parents=True, exist_ok=True)
        waited = not lock.try_acquire()
        if waited:
            # its pid only: a sibling worker's command line is multiprocessing's, which says nothing
            pids = ", ".join(str(pid) for pid in lock_holders(lock.path))
            say(
                "another process"
                + (f" (pid {pids})" if pids else "")
                + " is measuring this model on this machine: waiting for its verdict"
            )
            wait()
            while not lock.try_acquire():
                wait()
    except OSError as exc:  # a read-only cache, a file system without locks
        logger.debug("measuring unguarded: no lock on %s (%s)", lock.path, exc)
    try:
        yield waited
    finally:
        lock.release(remove=True)
