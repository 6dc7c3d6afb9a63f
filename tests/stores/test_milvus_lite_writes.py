"""A Milvus Lite collection is released while dense rows stream in, and loaded for the next read.

A loaded Milvus Lite collection indexes every segment it flushes or merges in the writer's process;
during an ingest that work competes with the forward pass. Writes do not need the collection
loaded, so the store releases it on its first dense write and loads it again (building each final
segment's index once) on the first read or at close. Layouts whose writes read stored rows (BM25
statistics) stay loaded. Everything runs on real Milvus Lite files.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pymilvus.client.types import LoadState

from poolrag.stores import ChunkRecord, CollectionSpec, open_store
from poolrag.stores.milvus import MilvusStore
from poolrag.testing.store_internals import milvus_client

DENSE = CollectionSpec(name="docs", dimension=8, model_identity="tiny@1", full_dimension=8, model_name="tiny")


def _records(first: int, n: int, seed: int = 0) -> list[ChunkRecord]:
    rng = np.random.default_rng(seed + first)
    return [
        ChunkRecord(
            f"c{i}", rng.standard_normal(8).astype(np.float32), {"text": f"chunk {i}", "source": "a.txt"}
        )
        for i in range(first, first + n)
    ]


def _state(store: MilvusStore) -> LoadState:
    return milvus_client(store).get_load_state(store.collection)["state"]


def test_dense_writes_run_released_and_the_next_read_loads(tmp_path: Path) -> None:
    store = open_store("milvus", "docs", uri=str(tmp_path / "docs.db"))
    assert isinstance(store, MilvusStore)
    try:
        store.ensure_collection(DENSE)
        assert _state(store) == LoadState.Loaded
        records = _records(0, 50)
        for start in range(0, 50, 16):
            store.upsert(records[start : start + 16])
        assert _state(store) == LoadState.NotLoad
        store.upsert(_records(0, 1, seed=7))  # an id written again replaces its row
        store.delete(["c49"])  # deletes by id need no load either
        assert _state(store) == LoadState.NotLoad

        replaced = _records(0, 1, seed=7)[0]
        hits = store.search(np.asarray(replaced.vector), limit=1)
        assert _state(store) == LoadState.Loaded
        assert [h.id for h in hits] == ["c0"] and hits[0].payload["text"] == "chunk 0"
        assert store.count() == 49
    finally:
        store.close()


def test_close_loads_a_released_collection_so_the_next_opener_finds_it(tmp_path: Path) -> None:
    database = str(tmp_path / "docs.db")
    records = _records(0, 40)
    store = open_store("milvus", "docs", uri=database)
    store.ensure_collection(DENSE)
    store.upsert(records)
    store.close()

    again = open_store("milvus", "docs", uri=database)
    try:
        assert isinstance(again, MilvusStore)
        assert _state(again) == LoadState.Loaded
        assert again.count() == 40
        assert [h.id for h in again.search(np.asarray(records[13].vector), limit=1)] == ["c13"]
    finally:
        again.close()


def test_bm25_collections_stay_loaded_because_their_writes_read_stored_rows(tmp_path: Path) -> None:
    from poolrag.sparse.vector import SparseVector

    spec = CollectionSpec(
        name="docs", dimension=8, model_identity="tiny@1", full_dimension=8, model_name="tiny", sparse="bm25"
    )
    store = open_store("milvus", "docs", uri=str(tmp_path / "docs.db"))
    try:
        store.ensure_collection(spec)
        records = [
            ChunkRecord(r.id, r.vector, r.payload, sparse=SparseVector.from_dict({i + 1: 1.0}))
            for i, r in enumerate(_records(0, 5))
        ]
        store.upsert(records)
        assert _state(store) == LoadState.Loaded
        assert store.count() == 5
    finally:
        store.close()


@pytest.mark.parametrize(("quantization", "index_type"), [(None, "AUTOINDEX"), ("int8", "HNSW_SQ")])
def test_a_new_lite_collection_is_indexed_as_its_spec_says_and_loaded(
    tmp_path: Path, quantization: str | None, index_type: str
) -> None:
    spec = CollectionSpec(
        name="docs",
        dimension=8,
        model_identity="tiny@1",
        full_dimension=8,
        model_name="tiny",
        quantization=quantization,
    )
    store = open_store("milvus", "docs", uri=str(tmp_path / "docs.db"))
    try:
        assert isinstance(store, MilvusStore)
        store.ensure_collection(spec)
        client = milvus_client(store)
        assert _state(store) == LoadState.Loaded
        assert client.list_indexes("docs") == ["vector"]
        described = client.describe_index("docs", "vector")
        assert described["index_type"] == index_type and described["metric_type"] == "COSINE"
        records = _records(0, 10)
        store.upsert(records)
        assert [h.id for h in store.search(np.asarray(records[4].vector), limit=1)] == ["c4"]
    finally:
        store.close()
