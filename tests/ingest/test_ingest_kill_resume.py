"""``kill -9`` in the middle of ``poolrag ingest``, then run it again: it resumes and ends exactly
where a clean run would (same chunks, same vectors, no duplicates)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from poolrag import PoolingParams
from poolrag.ingest import TokenChunker, read_paths
from poolrag.stores import open_store

SUBJECTS = [
    "volcanoes",
    "violins",
    "glaciers",
    "satellites",
    "orchids",
    "submarines",
    "deserts",
    "comets",
    "lighthouses",
    "mushrooms",
    "bridges",
    "owls",
    "tea",
    "robots",
    "canyons",
    "whales",
]


def _corpus(root: Path) -> Path:
    root.mkdir()
    for i, subject in enumerate(SUBJECTS):
        text = " ".join(
            f"Fact {n} about {subject}: observers in region {i} recorded detail {n * 7 + i} in their notes."
            for n in range(6)
        )
        (root / f"{i:02d}-{subject}.txt").write_text(text)
    return root


def _cli(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "poolrag.cli", "ingest", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["milvus", "qdrant"])
def test_sigkilled_ingest_resumes_to_the_same_result_as_a_clean_run(
    kind: str, tmp_path: Path, minilm_engine
) -> None:
    corpus = _corpus(tmp_path / "corpus")
    checkpoint = tmp_path / "ingest.checkpoint.json"
    location = ["--uri", str(tmp_path / "m.db")] if kind == "milvus" else ["--path", str(tmp_path / "q")]
    args = [
        str(corpus),
        "--store",
        kind,
        *location,
        "--collection",
        "docs",
        "--chunk-tokens",
        "32",
        "--overlap",
        "4",
        "--batch-size",
        "2",
        "--cache",
        str(tmp_path / "cache.sqlite"),
        "--checkpoint",
        str(checkpoint),
        "--quiet",
        "--json",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}

    proc = _cli(args, env)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if checkpoint.exists() and len(json.loads(checkpoint.read_text())["done"]) >= 2:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, (
        f"ingest was not killed mid-run (exit {proc.returncode}): {err[-2000:]}"
    )
    done_before = len(json.loads(checkpoint.read_text())["done"])
    assert 2 <= done_before < len(SUBJECTS)

    resumed = _cli(args, env)
    out, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err[-3000:]
    report = json.loads(out.strip().splitlines()[-1])

    chunker = TokenChunker(minilm_engine.tokenizer, max_tokens=32, overlap=4)
    chunks = [c for doc in read_paths([corpus]) for c in chunker.split(doc)]
    assert report["resumed"] is True and report["documents_skipped"] >= done_before
    assert report["embedded"] < len(chunks)  # what the killed run embedded came back from the cache
    assert not checkpoint.exists()

    store = open_store(kind, "docs", **({"uri": location[1]} if kind == "milvus" else {"path": location[1]}))
    try:
        assert store.count() == len(chunks)
        assert set(store.list_sources()) == {c.id for c in chunks}
        stored = store.fetch_vectors([c.id for c in chunks])
    finally:
        store.close()
    clean = minilm_engine.embed_array([c.text for c in chunks], PoolingParams(input_type="document"))
    got = np.stack([stored[c.id] for c in chunks])
    np.testing.assert_allclose(got, clean, atol=1e-5)
