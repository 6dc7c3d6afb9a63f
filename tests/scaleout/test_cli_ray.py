"""``poolrag ingest ... --ray``: the command starts its own local cluster, and writes the ids the
single-process command writes (so the plain command run after it finds everything stored); Ray's
own lines stay below WARNING unless -v, and poolrag makes no deprecated Ray call."""

from __future__ import annotations

import json
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


def test_ray_then_single_process_finds_every_chunk_stored(
    no_cluster_in_process, minilm_path: Path, tmp_path: Path
) -> None:
    corpus = write_corpus(tmp_path / "corpus", files=6)
    common = [str(corpus), "--model", str(minilm_path), "--store", "qdrant", "--path", str(tmp_path / "q")]
    common += ["--chunk-tokens", "48", "--overlap", "8", "--no-cache", "--json", "-q"]
    on_ray = ingest(*common, "--ray", "--ray-workers", "2")
    assert on_ray.returncode == 0, on_ray.stderr[-3000:]
    # Ray's INFO lines (its start, Ray Data's plan and progress reports), gRPC's fork notes, and
    # Ray's warning about poolrag's own map_batches call (ray_remote_args) were ~20 lines here
    chatter = [
        line
        for line in on_ray.stderr.splitlines()
        if "\tINFO " in line or "Deprecat" in line or "fork_posix" in line or "%|" in line
    ]
    assert chatter == [], on_ray.stderr[-3000:]
    ray_report = json.loads(on_ray.stdout.strip().splitlines()[-1])
    assert ray_report["documents"] == 6 and ray_report["upserted"] == ray_report["chunks"] > 6
    plain = ingest(*common, "--checkpoint", str(tmp_path / "ck.json"))
    assert plain.returncode == 0, plain.stderr[-3000:]
    report = json.loads(plain.stdout.strip().splitlines()[-1])
    assert report["chunks"] == report["chunks_existing"] == ray_report["chunks"]
    assert report["upserted"] == report["deleted"] == 0


def test_flags_the_ray_path_does_not_honour_are_refused_before_any_work(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus", files=1)
    store = ["--store", "qdrant", "--path", str(tmp_path / "q")]
    done = ingest(str(corpus), *store, "--hybrid", "--sparse-model", "x", "--ray")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "poolrag ingest: error: --ray --hybrid makes BM25 vectors; ingest with --sparse-model without --ray"
    )
    assert not (tmp_path / "q").exists()  # nothing was opened
