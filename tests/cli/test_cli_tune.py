"""``poolrag tune --workers N``: the verdict it saves is the one each ``poolrag serve --workers N``
worker looks up, so the workers take it instead of measuring while their siblings load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from poolrag.worker_threads import worker_threads


def test_tune_with_workers_measures_with_the_threads_each_serve_worker_takes(
    tmp_path: Path, tiny_model
) -> None:
    cache = tmp_path / "poolrag-cache"
    env = os.environ | {"HF_HUB_OFFLINE": "1", "POOLRAG_CACHE_DIR": str(cache)}
    env.pop("OMP_NUM_THREADS", None)  # the user's setting would win for tune and workers alike
    command = ["tune", str(tiny_model("bert")), "--workers", "2", "--no-compile", "--log-level", "error"]
    done = subprocess.run(
        [sys.executable, "-m", "poolrag.cli", *command], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [verdict] = (cache / "tune").glob("*.json")
    # serve's WorkerPool gives each of its N workers worker_threads(N) torch threads
    assert json.loads(verdict.read_text())["key"]["threads"] == worker_threads(2)
