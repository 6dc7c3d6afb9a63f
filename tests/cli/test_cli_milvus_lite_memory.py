"""``poolrag ingest`` into a Milvus Lite file tells the user, on stderr and once, when the rows Milvus
Lite keeps in the process outgrow memory, and which stores keep rows on disk; the ingest completes.

The bound is 512 MiB of rows; the child process lowers it to a few rows' worth before the command
runs, so the real CLI, logging set-up and Milvus Lite are what the user would see.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"

_RUN_WITH_A_SMALL_BOUND = (
    "import sys\n"
    "from poolrag.stores import milvus_lite_memory\n"
    "milvus_lite_memory.RESIDENT_BOUND_BYTES = 4 * milvus_lite_memory.ROW_OVERHEAD_BYTES\n"
    "from poolrag.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def _ingest(tmp_path: Path, store: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "POOLRAG_CACHE_DIR": str(tmp_path / "cache")}
    args = ["ingest", str(SAMPLES), *store, "--no-cache", "--quiet", "--json", "--chunk-tokens", "32"]
    return subprocess.run(
        [sys.executable, "-c", _RUN_WITH_A_SMALL_BOUND, *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_milvus_lite_ingest_past_the_bound_says_so_once_on_stderr(tmp_path: Path) -> None:
    database = tmp_path / "docs.db"
    run = _ingest(tmp_path, ["--uri", str(database)])
    assert run.returncode == 0, run.stderr
    said = [line for line in run.stderr.splitlines() if "keeps every stored row" in line]
    assert len(said) == 1, run.stderr
    assert str(database) in said[0] and "--store qdrant-edge" in said[0] and "Milvus server" in said[0]
    report = json.loads(run.stdout)
    assert report["upserted"] == report["chunks"] > 4  # past the bound, and nothing lost


def test_a_qdrant_edge_ingest_of_the_same_corpus_says_nothing(tmp_path: Path) -> None:
    run = _ingest(tmp_path, ["--store", "qdrant-edge", "--path", str(tmp_path / "edge")])
    assert run.returncode == 0, run.stderr
    assert "keeps every stored row" not in run.stderr
