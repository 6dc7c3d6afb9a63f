"""Who writes on Ray: the actors into a server store, the driver into a single-process one.

A real Milvus server (Milvus Lite's gRPC server on 127.0.0.1) takes the actors' upserts directly and
ends up holding what a single-process run writes; Milvus Lite files and Qdrant local folders, which
one process at a time may open, are written by the driver (the other tests of this folder).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from milvus_server import free_port, start_server
from ray import cloudpickle
from test_ray_ingest import CHUNK_TOKENS, OVERLAP, contents, write_corpus

from poolrag.cache import CachedEmbedder
from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker, read_paths
from poolrag.scaleout.ray_ingest import (
    ChunkEmbedder,
    EngineRecipe,
    RayIngestOptions,
    actors_write,
    ingest_on_ray,
)
from poolrag.stores import open_store
from poolrag.stores.address import StoreAddress

cloudpickle.register_pickle_by_value(sys.modules[__name__])


MILVUS_SERVER = StoreAddress("milvus", "docs", uri="http://127.0.0.1:19530")
QDRANT_SERVER = StoreAddress("qdrant", "docs", url="http://127.0.0.1:6333")


@pytest.mark.parametrize(
    ("address", "sparse", "by_actors"),
    [
        (MILVUS_SERVER, None, True),
        (QDRANT_SERVER, None, True),
        (QDRANT_SERVER, "bm25", True),  # Qdrant weighs BM25 terms on the server
        (MILVUS_SERVER, "bm25", False),  # poolrag's BM25 statistics: read, changed, written back
        (StoreAddress("milvus", "docs", uri="/data/poolrag_milvus.db"), None, False),
        (StoreAddress("qdrant", "docs", path="/data/poolrag_qdrant"), None, False),
        (StoreAddress("qdrant-edge", "docs", path="/data/poolrag_edge"), None, False),
        (None, None, False),
    ],
)
def test_only_a_server_store_is_written_by_the_actors(
    address: StoreAddress | None, sparse: str | None, by_actors: bool
) -> None:
    assert actors_write(address, sparse) is by_actors


class MarksItsWrites(ChunkEmbedder):
    """Leaves a file behind when it upserted chunks itself (the flag's folder is shared with the test)."""

    flag = ""

    def __call__(self, batch):
        rows = super().__call__(batch)
        if self.store is not None and rows["written"].any():
            Path(self.flag).touch()
        return rows


def test_actors_write_to_a_milvus_server_what_one_process_writes(
    ray_cluster, minilm_engine, minilm_path: Path, tmp_path: Path
) -> None:
    corpus = write_corpus(tmp_path / "corpus", files=6)
    local = open_store("milvus", "docs", uri=str(tmp_path / "local.db"))
    chunker = TokenChunker.for_model(minilm_engine.tokenizer, minilm_engine.facts, CHUNK_TOKENS, OVERLAP)
    try:
        IngestPipeline(
            local, DenseEncoder(CachedEmbedder(minilm_engine, None)), chunker, checkpoint_dir=tmp_path / "ck1"
        ).run(read_paths([corpus]))
        want = contents(local)
    finally:
        local.close()

    port = free_port()
    server = start_server(tmp_path / "server", port)
    address = StoreAddress("milvus", "docs", uri=f"http://127.0.0.1:{port}")
    flag = tmp_path / "an-actor-wrote"
    actor = type("MarksItsWritesHere", (MarksItsWrites,), {"flag": str(flag)})
    store = address.open()
    try:
        report = ingest_on_ray(
            read_paths([corpus]),
            store,
            EngineRecipe(str(minilm_path), chunk_tokens=CHUNK_TOKENS, overlap=OVERLAP),
            options=RayIngestOptions(workers=2, documents_per_batch=2),  # both actors write
            checkpoint_dir=tmp_path / "ck2",
            store_address=address,
            embedder_class=actor,
        )
        assert flag.exists()  # the chunks went from the actors to the server
        assert report.upserted == report.chunks == len(want) and report.chunks_existing == 0
        got = contents(store)
        again = ingest_on_ray(
            read_paths([corpus]),
            store,
            EngineRecipe(str(minilm_path), chunk_tokens=CHUNK_TOKENS, overlap=OVERLAP),
            checkpoint_dir=tmp_path / "ck2",
            store_address=address,
        )
        assert again.chunks_existing == again.chunks == len(want) and again.upserted == 0
    finally:
        store.close()
        server.terminate()
        server.wait(timeout=30)
    assert got.keys() == want.keys()
    for cid, (source, vector) in want.items():
        assert got[cid][0] == source
        np.testing.assert_allclose(got[cid][1], vector, atol=1e-6, rtol=0)
