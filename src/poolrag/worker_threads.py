"""How many torch threads a process on this machine takes: ``poolrag serve --workers N`` gives every
worker its share, ``poolrag tune --workers N`` measures with it, and a command's own process takes
the CPUs a quota leaves it (:func:`take_cpu_quota`).

A tune verdict is kept per thread count (which path is fastest changes with it), so a verdict is
taken by a worker only when it was measured with the worker's own count: one rule for both. The
CPUs are those the process may use (:mod:`poolrag.cpu_budget`: the affinity mask cut to a
container's CPU quota), so a verdict timed on the whole host is not taken under ``--cpus 2``.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from poolrag.cpu_budget import PROC_SELF, affinity_cpus, usable_cpus

logger = logging.getLogger(__name__)


def worker_threads(workers: int) -> int:
    """Each of ``workers`` processes' share of the CPUs this process may use, at least one."""
    return max(1, usable_cpus() // workers)


#: torch threads the command owning this process asked its engines to take (a CPU quota's)
_quota_threads: int | None = None


def take_worker_threads(threads: int) -> None:
    """Sets this process's torch threads to ``threads``, unless ``OMP_NUM_THREADS`` chose them
    (the user's setting wins, as torch's own default gives way to it)."""
    global _quota_threads
    _quota_threads = None  # a count chosen here stands
    if "OMP_NUM_THREADS" not in os.environ:
        import torch

        torch.set_num_threads(threads)


def take_cpu_quota(proc_self: Path = PROC_SELF) -> None:
    """The command owning this process takes, when it builds an engine (:func:`quota_threads_taken`),
    the CPUs a quota below the affinity mask leaves it as torch threads (torch would start one per
    CPU of the mask). torch is not imported here: a parent of workers runs no model. ``proc_self``:
    where the process's ``cgroup`` and ``mountinfo`` files are read. ``OMP_NUM_THREADS`` wins, and
    then nothing is taken (the log said the quota's count was, beside torch running the user's)."""
    global _quota_threads
    cpus = usable_cpus(proc_self)
    _quota_threads = cpus if cpus < affinity_cpus() and "OMP_NUM_THREADS" not in os.environ else None


def quota_threads_taken() -> None:
    """Called as an engine is built, before its tune verdict is looked up (keyed by the count)."""
    if _quota_threads is not None:
        cpus = _quota_threads
        logger.info(
            "a CPU quota leaves this process %d of its %d CPUs: %d torch threads", cpus, affinity_cpus(), cpus
        )
        take_worker_threads(cpus)
