"""Milvus Lite through the CLI, as a user runs it, says nothing on stderr on whichever pymilvus is
installed: 3.x (the tests session) or 2.6 (the llamaindex session, beside LlamaIndex's Milvus store).
Each paginated read makes pymilvus warn that Milvus Lite gave it no timestamp, from a logger whose
module moved between the two."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pymilvus

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _poolrag(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "POOLRAG_CACHE_DIR": str(cwd / "cache")}
    return subprocess.run(
        [sys.executable, "-m", "poolrag.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_ingest_and_search_print_nothing_on_stderr(tmp_path: Path) -> None:
    store = ["--uri", str(tmp_path / "lite.db"), "--collection", "quiet"]
    ingest = _poolrag(["ingest", str(SAMPLES / "nature"), "-q", *store], tmp_path)
    assert ingest.returncode == 0, ingest.stderr[-3000:]
    assert "3 documents" in ingest.stdout, ingest.stdout
    search = _poolrag(["search", "why do corals turn white", "-k", "2", "--json", *store], tmp_path)
    assert search.returncode == 0, search.stderr[-3000:]
    assert json.loads(search.stdout.splitlines()[0])["source"].endswith("nature/coral-reefs.md")
    for run in (ingest, search):
        assert run.stderr == "", f"pymilvus {pymilvus.__version__}: {run.stderr[-2000:]}"
