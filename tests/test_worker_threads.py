"""The command that owns a process builds its engines on the CPUs a container's quota leaves it
(:func:`poolrag.worker_threads.take_cpu_quota`), in a fresh interpreter (torch's threads are per
process), with a cgroup folder written as the kernel writes one; ``OMP_NUM_THREADS`` still wins."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from poolrag.cpu_budget import affinity_cpus

BUILD = """
import sys
from pathlib import Path

import torch

from poolrag import Engine
from poolrag.worker_threads import take_cpu_quota

take_cpu_quota(Path(sys.argv[1]))
before = torch.get_num_threads()
Engine(sys.argv[2]).embed(["a text"])
print(before, torch.get_num_threads())
"""


def threads_in_child(proc_self: Path, model: Path, **env: str) -> tuple[int, int]:
    """torch's threads in a fresh process before and after it built and ran an engine."""
    before, after = build_in_child(proc_self, model, **env).stdout.split()
    return int(before), int(after)


def build_in_child(proc_self: Path, model: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """A fresh process that built and ran an engine, its INFO log lines on stderr."""
    child_env = {name: value for name, value in os.environ.items() if name != "OMP_NUM_THREADS"}
    logged = f"import logging\nlogging.basicConfig(level=logging.INFO)\n{BUILD}"
    run = subprocess.run(
        [sys.executable, "-c", logged, str(proc_self), str(model)],
        env={**child_env, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    return run


def test_an_engine_built_under_a_one_cpu_quota_runs_one_torch_thread(
    one_cpu_proc_self: Path, minilm_path: Path
) -> None:
    before, after = threads_in_child(one_cpu_proc_self, minilm_path)
    assert before == affinity_cpus()  # torch's own count: the affinity mask, whatever the quota
    assert after == 1


def test_omp_num_threads_wins_over_the_quota(one_cpu_proc_self: Path, minilm_path: Path) -> None:
    assert threads_in_child(one_cpu_proc_self, minilm_path, OMP_NUM_THREADS="2") == (2, 2)


def test_under_omp_num_threads_the_log_claims_no_quota_threads(
    one_cpu_proc_self: Path, minilm_path: Path
) -> None:
    """torch kept the user's two threads while an INFO line said the engine ran the quota's one."""
    run = build_in_child(one_cpu_proc_self, minilm_path, OMP_NUM_THREADS="2")
    assert run.stdout.split() == ["2", "2"]
    assert "a CPU quota leaves" not in run.stderr, run.stderr
