"""``kill -9`` in the middle of ``poolrag ingest --hybrid``, then run it again: it resumes, and the
collection holds exactly what a clean run writes, sparse vectors included (the average chunk
length the killed run recorded is the one the resumed run uses)."""

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

from poolrag.ingest import TokenChunker, read_paths
from poolrag.ingest.sparse_encoders import BM25_OPTIONS_KEY
from poolrag.sparse import BM25Encoder
from poolrag.stores import open_store

SUBJECTS = ["volcanoes", "violins", "glaciers", "satellites", "orchids", "submarines", "deserts", "comets"]
SUBJECTS += ["lighthouses", "mushrooms", "bridges", "owls", "tea", "robots", "canyons", "whales"]


def _corpus(root: Path) -> Path:
    root.mkdir()
    for i, subject in enumerate(SUBJECTS):
        text = " ".join(
            f"Fact {n} about {subject}: observers in region {i} logged reading {n * 7 + i} twice."
            for n in range(6)
        )
        (root / f"{i:02d}-{subject}.txt").write_text(text)
    return root


def _cli(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.Popen(
        [sys.executable, "-m", "poolrag.cli", "ingest", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _stored_sparse(store, kind: str, ids: list[str]) -> dict[str, dict[int, float]]:
    if kind == "milvus":
        return {cid: v.to_dict() for cid, v in store.fetch_sparse(ids).items()}
    points = store._client.retrieve(store.collection, ids=ids, with_vectors=["sparse"])
    vectors = {str(p.id): p.vector["sparse"] for p in points}
    return {cid: dict(zip(v.indices, v.values, strict=True)) for cid, v in vectors.items()}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["milvus", "qdrant"])
def test_sigkilled_hybrid_ingest_resumes_to_the_clean_result(
    kind: str, tmp_path: Path, minilm_engine
) -> None:
    corpus = _corpus(tmp_path / "corpus")
    checkpoint = tmp_path / "ingest.checkpoint.json"
    location = ["--uri", str(tmp_path / "m.db")] if kind == "milvus" else ["--path", str(tmp_path / "q")]
    args = [str(corpus), "--store", kind, *location, "--collection", "docs", "--hybrid"]
    args += ["--chunk-tokens", "32", "--overlap", "4", "--batch-size", "2"]
    args += ["--cache", str(tmp_path / "cache.sqlite"), "--checkpoint", str(checkpoint), "--quiet", "--json"]

    proc = _cli(args)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if checkpoint.exists() and len(json.loads(checkpoint.read_text())["done"]) >= 2:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, f"not killed mid-run (exit {proc.returncode}): {err[-2000:]}"
    done_before = len(json.loads(checkpoint.read_text())["done"])
    assert 2 <= done_before < len(SUBJECTS)

    resumed = _cli(args)
    out, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err[-3000:]
    report = json.loads(out.strip().splitlines()[-1])
    chunker = TokenChunker(minilm_engine.tokenizer, max_tokens=32, overlap=4)
    chunks = [c for doc in read_paths([corpus]) for c in chunker.split(doc)]
    assert report["resumed"] is True and report["documents_skipped"] >= done_before
    assert report["sparse_computed"] < len(chunks)  # the killed run's term counts came from the cache

    store = open_store(kind, "docs", **({"uri": location[1]} if kind == "milvus" else {"path": location[1]}))
    try:
        assert store.count() == len(chunks)
        assert set(store.list_sources()) == {c.id for c in chunks}
        recorded = store.read_spec().model_options[BM25_OPTIONS_KEY]
        stored = _stored_sparse(store, kind, [c.id for c in chunks])
    finally:
        store.close()
    bm25 = BM25Encoder(minilm_engine.tokenizer)
    counts = bm25.term_counts([c.text for c in chunks])
    # The first batch (two chunks of the first document) fixed the average length.
    assert recorded["avg_doc_length"] == pytest.approx(sum(sum(c.values()) for c in counts[:2]) / 2)
    clean = bm25.document_vectors(counts, recorded["avg_doc_length"])
    for chunk, want in zip(chunks, clean, strict=True):
        got = stored[chunk.id]
        assert sorted(got) == want.indices.tolist()
        np.testing.assert_allclose([got[t] for t in want.indices.tolist()], want.values, rtol=1e-6)
