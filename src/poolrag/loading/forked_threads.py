"""A model loaded in a forked process runs its loading ops on one thread.

torch's CPU wheel uses GNU OpenMP, whose thread team belongs to the thread that first ran a
parallel op: fork() copies the team's bookkeeping but not its threads, so the next parallel op on
that thread in the child waits forever. A worker forked from a process whose main thread ran torch
(LlamaIndex's ``IngestionPipeline.arun(num_workers=...)`` unpickles an embedding class in each
forked worker, and the class loads its engine there) hung in its first large ``torch.cat`` while
loading weights. Loading in such a child runs on one thread, which enters no team; the thread count
comes back afterwards, for the engine's own worker threads, which start teams of their own.

A fork is known from the hook below when this module was imported before it, and otherwise (a
parent that ran torch but imported poolrag's loading only in the child) from the auxiliary vector
the kernel wrote at the last ``exec``: a forked child keeps its parent's, byte for byte, while an
exec'd process (``spawn``, a shell's) gets its own, with addresses randomized anew.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch

_forked = False


def _after_fork_in_child() -> None:
    global _forked
    _forked = True


os.register_at_fork(after_in_child=_after_fork_in_child)


def _forked_before_import() -> bool:
    """Whether this process shares its parent's ``exec`` (Linux; ``False`` where unreadable)."""
    try:
        with open("/proc/self/auxv", "rb") as own, open(f"/proc/{os.getppid()}/auxv", "rb") as parent:
            return own.read() == parent.read()
    except OSError:
        return False


@contextmanager
def one_thread_if_forked() -> Iterator[None]:
    """The block on one torch thread in a forked process (see the module's docstring); as it is
    elsewhere."""
    if not (_forked or _forked_before_import()):
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
