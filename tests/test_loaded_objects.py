"""A long-running command leaves what loading made out of Python's cyclic collections once its
models are loaded (``poolrag.loaded_objects``): an ingest run does, a one-shot search does not pay
for the freeze's collection."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "nature"
AFTER_MAIN = (
    "import gc, json, sys\n"
    "from poolrag.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "print(json.dumps([code, gc.get_freeze_count()]))\n"
)


def _frozen_after(args: list[str], tmp_path: Path) -> int:
    """The objects frozen when ``poolrag ARGS`` has returned in a fresh interpreter."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "POOLRAG_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-c", AFTER_MAIN, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    code, frozen = json.loads(done.stdout.strip().splitlines()[-1])
    assert code == 0, done.stderr[-2000:]
    return frozen


def test_an_ingest_run_freezes_what_loading_made_and_a_search_does_not(tmp_path: Path, tiny_model) -> None:
    model = str(tiny_model("bert"))
    store = ["--store", "qdrant", "--path", str(tmp_path / "qdrant"), "--collection", "nature"]
    frozen = _frozen_after(["ingest", str(SAMPLES), "--model", model, "-q", *store], tmp_path)
    assert frozen > 50_000  # torch, transformers and the model: far more than the run's own objects
    assert _frozen_after(["search", "bees", "--model", model, *store], tmp_path) == 0
