"""How many torch threads each of N processes on this machine takes: ``poolrag serve --workers N``
gives every worker this share, and ``poolrag tune --workers N`` measures with it.

A tune verdict is kept per thread count (which path is fastest changes with it), so a verdict is
taken by a worker only when it was measured with the worker's own count: one rule for both.
"""

from __future__ import annotations

import os


def worker_threads(workers: int) -> int:
    """Each of ``workers`` processes' share of this process's CPUs, at least one."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cpus // workers)


def take_worker_threads(threads: int) -> None:
    """Sets this process's torch threads to ``threads``, unless ``OMP_NUM_THREADS`` chose them
    (the user's setting wins, as torch's own default gives way to it)."""
    if "OMP_NUM_THREADS" not in os.environ:
        import torch

        torch.set_num_threads(threads)
