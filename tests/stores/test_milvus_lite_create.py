"""A new Milvus Lite collection is created indexed as its spec says, loaded, and searchable.

The store creates a Milvus Lite collection in three calls (create, index without pymilvus's fixed
0.5 s wait, load) instead of one; what a user gets must be what the one call gave. Everything runs
on real Milvus Lite files.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pymilvus.client.types import LoadState

from poolrag.errors import InvalidInputError
from poolrag.stores import ChunkRecord, CollectionSpec, open_store
from poolrag.stores.milvus import MilvusStore
from poolrag.testing.store_internals import milvus_client


def _records(n: int) -> list[ChunkRecord]:
    rng = np.random.default_rng(0)
    return [
        ChunkRecord(
            f"c{i}", rng.standard_normal(8).astype(np.float32), {"text": f"chunk {i}", "source": "a.txt"}
        )
        for i in range(n)
    ]


def _spec(quantization: str | None = None) -> CollectionSpec:
    return CollectionSpec(
        name="docs",
        dimension=8,
        model_identity="tiny@1",
        full_dimension=8,
        model_name="tiny",
        quantization=quantization,
    )


@pytest.mark.parametrize(("quantization", "index_type"), [(None, "FLAT"), ("int8", "HNSW_SQ")])
def test_a_new_lite_collection_is_indexed_as_its_spec_says_and_loaded(
    tmp_path: Path, quantization: str | None, index_type: str
) -> None:
    store = open_store("milvus", "docs", uri=str(tmp_path / "docs.db"))
    try:
        assert isinstance(store, MilvusStore)
        store.ensure_collection(_spec(quantization))
        client = milvus_client(store)
        assert client.get_load_state("docs")["state"] == LoadState.Loaded
        assert client.list_indexes("docs") == ["vector"]
        described = client.describe_index("docs", "vector")
        assert described["index_type"] == index_type and described["metric_type"] == "COSINE"
        records = _records(10)
        store.upsert(records)
        assert [h.id for h in store.search(np.asarray(records[4].vector), limit=1)] == ["c4"]
    finally:
        store.close()


def test_the_next_opener_finds_the_collection_loaded_with_its_rows(tmp_path: Path) -> None:
    database = str(tmp_path / "docs.db")
    records = _records(40)
    store = open_store("milvus", "docs", uri=database)
    store.ensure_collection(_spec())
    store.upsert(records)
    store.close()

    again = open_store("milvus", "docs", uri=database)
    try:
        assert again.count() == 40
        assert [h.id for h in again.search(np.asarray(records[13].vector), limit=1)] == ["c13"]
    finally:
        again.close()


def test_a_uri_that_is_a_file_is_refused_at_once_in_one_line(tmp_path: Path, capsys) -> None:
    """Milvus Lite 3 keeps a database in a folder; a file there (one Milvus Lite 2 wrote, a typo)
    was retried for 9 s as a database another process holds, then exit 3 "unavailable"."""
    from poolrag.cli import main

    (tmp_path / "old.db").write_text("a file")
    with pytest.raises(InvalidInputError, match="is a file, not a Milvus Lite database"):
        open_store("milvus", "docs", uri=str(tmp_path / "old.db"))
    args = ["ingest", str(tmp_path / "old.db"), "--uri", str(tmp_path / "old.db"), "--no-cache", "-q"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is a file, not a Milvus Lite database" in err
