"""A Milvus Lite search returns every row it is asked for, at full recall, on the graph index the
store creates. Milvus Lite's default candidate list (about k) answered k=1000 on a 674-chunk
collection (killed and resumed, then searched from the CLI) with 500 rows; the store now asks for a
list of at least ``LITE_MIN_EF`` rows or k (674 rows from that file). That file's graph could not be
rebuilt here from its vectors, so this holds the contract on clustered vectors in real Milvus Lite
files, on both indexes the store creates (exact for plain vectors, int8's HNSW_SQ graph); a file
made before its plain index was exact has Milvus Lite's graph, which gets the same depth."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from poolrag.stores import ChunkRecord, CollectionSpec, open_store

ROWS, WIDTH = 700, 384


def _clustered(seed: int = 0) -> np.ndarray:
    """One direction plus noise: the shape on which the default candidate list came up short."""
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(1, WIDTH)) + 0.2 * rng.normal(size=(ROWS, WIDTH))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("quantization", [None, "int8"])
def test_k_above_the_row_count_returns_every_row_and_the_top_ten_are_exact(
    tmp_path: Path, quantization: str | None
) -> None:
    vectors = _clustered()
    database = str(tmp_path / "docs.db")
    spec = CollectionSpec(
        name="docs", dimension=WIDTH, model_identity="m@1", full_dimension=WIDTH, quantization=quantization
    )
    store = open_store("milvus", "docs", uri=database)
    store.ensure_collection(spec)
    for start in range(0, ROWS, 64):  # an ingest's batches: sealed segments, an index built on them
        store.upsert(
            [
                ChunkRecord(f"c{i}", vectors[i], {"text": f"chunk {i}", "source": "a.txt"})
                for i in range(start, start + 64)
                if i < ROWS
            ]
        )
    store.close()
    store = open_store("milvus", "docs", uri=database)  # the next run opens the indexed file
    try:
        hits = store.search(vectors[0], limit=1000)
        assert len(hits) == ROWS and len({h.id for h in hits}) == ROWS
        queries = _clustered(seed=1)[:20]
        exact = np.argsort(-(queries @ vectors.T), axis=1)[:, :10]
        for query, want in zip(queries, exact, strict=True):
            got = {h.id for h in store.search(query, limit=10)}
            assert len(got & {f"c{i}" for i in want}) >= (10 if quantization is None else 9)
    finally:
        store.close()


def test_every_dense_search_of_a_lite_file_asks_for_the_depth(tmp_path: Path, monkeypatch) -> None:
    """What the contract above rests on, seen at the real client: the dense search (and a hybrid's
    dense leg) asks Milvus Lite's graph for at least ``LITE_MIN_EF`` candidates, or k."""
    from poolrag.stores.milvus import LITE_MIN_EF
    from poolrag.testing.store_internals import milvus_client

    vectors = _clustered()
    spec = CollectionSpec(name="docs", dimension=WIDTH, model_identity="m@1", full_dimension=WIDTH)
    with open_store("milvus", "docs", uri=str(tmp_path / "docs.db")) as store:
        store.ensure_collection(spec)
        store.upsert([ChunkRecord(f"c{i}", vectors[i], {"text": "t", "source": "a.txt"}) for i in range(50)])
        client = milvus_client(store)
        asked: list[dict] = []
        real_search = client.search

        def search(*args, **kwargs):
            asked.append(kwargs.get("search_params") or {})
            return real_search(*args, **kwargs)

        monkeypatch.setattr(client, "search", search)
        assert len(store.search(vectors[0], limit=5)) == 5
        assert len(store.search(vectors[0], limit=400)) == 50
    assert [a["params"]["ef"] for a in asked] == [LITE_MIN_EF, 400]


def _poolrag(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"HF_HUB_OFFLINE": "1", "POOLRAG_CACHE_DIR": str(tmp_path / "cache")}
    command = [sys.executable, "-m", "poolrag.cli", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


def test_a_document_beside_a_file_of_identical_chunks_is_found(tmp_path: Path, minilm_path: Path) -> None:
    """A space-less text is cut in 100-character pieces, 200 identical chunks here (a footer every
    page repeats does the same): searched by the next process, which reads the file's built index,
    Milvus Lite's graph answered with copies only, at any depth, and never found the one other
    document. A Lite file's dense index is exact, as Qdrant's local mode is. (The process that
    wrote the file still searches its rows unindexed, so each command runs in a process of its own.)"""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text(
        "# Good\n\nKittens purr when they are content and sometimes when anxious.\n"
    )
    (docs / "nospace.txt").write_text("x" * 20_000)
    store_args = ["--model", str(minilm_path), "--uri", str(tmp_path / "docs.db"), "--collection", "docs"]
    ingest = _poolrag(["ingest", str(docs), *store_args, "--no-cache", "-q"], tmp_path)
    assert ingest.returncode == 0, ingest.stderr[-3000:]
    search = _poolrag(["search", "kittens purr", *store_args, "-k", "300", "--json"], tmp_path)
    assert search.returncode == 0, search.stderr[-3000:]
    rows = [json.loads(line) for line in search.stdout.splitlines()]
    assert len(rows) == 201 and Path(rows[0]["source"]).name == "good.md"
