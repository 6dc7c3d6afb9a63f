"""``poolrag ingest ... --ray`` refuses, before it opens anything, the flags its Ray path does not
honour. The command run on Ray to the end (and killed, and resumed) is test_cli_ray_checkpoint.py's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from test_ray_ingest import write_corpus


def ingest(*args: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "RAY_AUTH_MODE": "disabled"}
    return subprocess.run(
        [sys.executable, "-m", "poolrag.cli", "ingest", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def test_flags_the_ray_path_does_not_honour_are_refused_before_any_work(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus", files=1)
    store = ["--store", "qdrant", "--path", str(tmp_path / "q")]
    done = ingest(str(corpus), *store, "--hybrid", "--sparse-model", "x", "--ray")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "poolrag ingest: error: --ray --hybrid makes BM25 vectors; ingest with --sparse-model without --ray"
    )
    assert not (tmp_path / "q").exists()  # nothing was opened
