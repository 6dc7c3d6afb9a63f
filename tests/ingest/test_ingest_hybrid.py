"""IngestPipeline with a BM25 sparse field, against real Milvus Lite and Qdrant local mode: the stored
sparse vectors are BM25's term-frequency half by hand, re-runs write nothing, a new collection
takes term counts from the cache, and the average chunk length is pinned in the collection."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ingest_support import write_corpus

from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.cache.term_counts import CachedTermCounter
from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker, read_paths
from poolrag.ingest.sparse_encoders import BM25ChunkEncoder, bm25_for_model
from poolrag.sparse import BM25Encoder
from poolrag.sparse.bm25 import BM25_RECORD_KEY
from poolrag.stores import STORES, CollectionMismatchError, InMemoryStore, open_store

KINDS = ["milvus", "qdrant"]
K1, B = 1.2, 0.75


def _open(kind: str, root: Path, collection: str = "docs"):
    if kind == "memory":
        return InMemoryStore(collection)
    where = {"uri": str(root / "m.db")} if kind == "milvus" else {"path": str(root / kind)}
    return open_store(kind, collection, **where)


def _pipeline(store, engine, root: Path, *, hybrid: bool = True, batch_size: int = 4, avg=None):
    cache = EmbeddingCache(root / "cache.sqlite")
    sparse = BM25ChunkEncoder(
        BM25Encoder(engine.tokenizer), engine.facts.model_identity, cache, avg_doc_length=avg
    )
    pipeline = IngestPipeline(
        store,
        DenseEncoder(CachedEmbedder(engine, cache)),
        TokenChunker(engine.tokenizer, max_tokens=24, overlap=4),
        batch_size=batch_size,
        checkpoint_dir=root / "ck",
        progress=False,
        sparse_encoder=sparse if hybrid else None,
    )
    return pipeline, sparse


def _chunks(engine, corpus: Path):
    chunker = TokenChunker(engine.tokenizer, max_tokens=24, overlap=4)
    return [c for d in read_paths([corpus]) for c in chunker.split(d)]


def _hand_tf_half(counts: dict[int, int], avgdl: float) -> dict[int, float]:
    length = sum(counts.values())
    return {t: n * (K1 + 1) / (n + K1 * (1 - B + B * length / avgdl)) for t, n in counts.items()}


def _stored_sparse(store, kind: str, ids: list[str]) -> dict[str, dict[int, float]]:
    if kind == "milvus":
        return {cid: v.to_dict() for cid, v in store.fetch_sparse(ids).items()}
    points = store._client.retrieve(store.collection, ids=ids, with_vectors=["sparse"])
    return {
        str(p.id): dict(zip(p.vector["sparse"].indices, p.vector["sparse"].values, strict=True))
        for p in points
    }


@pytest.mark.parametrize("kind", KINDS)
def test_hybrid_ingest_writes_bm25_by_hand_and_reruns_write_nothing(
    kind: str, tmp_path: Path, minilm_engine
) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    chunks = _chunks(minilm_engine, corpus)
    store = _open(kind, tmp_path)
    try:
        pipeline, sparse = _pipeline(store, minilm_engine, tmp_path)
        report = pipeline.run(read_paths([corpus]))
        assert report.upserted == len(chunks) and report.sparse_computed == len(chunks)
        assert report.collection["sparse"] == "bm25"

        # The average length is the first batch's (4 chunks), pinned in the collection.
        bm25 = BM25Encoder(minilm_engine.tokenizer)
        counts = bm25.term_counts([c.text for c in chunks])
        first = counts[:4]
        avgdl = sum(sum(c.values()) for c in first) / 4
        recorded = store.read_spec().model_options[BM25_RECORD_KEY]
        assert recorded == {
            "avg_doc_length": pytest.approx(avgdl),
            "k1": K1,
            "b": B,
            "analyzer": {"name": "wordpiece"},  # queries are analysed as the documents were
        }
        assert sparse.avg_doc_length == pytest.approx(avgdl)

        stored = _stored_sparse(store, kind, [c.id for c in chunks])
        for chunk, chunk_counts in zip(chunks, counts, strict=True):
            want = _hand_tf_half(chunk_counts, avgdl)
            got = stored[chunk.id]
            assert set(got) == set(want), chunk.text
            np.testing.assert_allclose([got[t] for t in want], list(want.values()), rtol=1e-5)

        again, _ = _pipeline(store, minilm_engine, tmp_path)
        second = again.run(read_paths([corpus]))
        assert (second.upserted, second.embedded, second.sparse_computed) == (0, 0, 0)
        assert second.chunks_existing == len(chunks)
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["memory", *STORES])
def test_a_new_hybrid_collection_exists_from_the_start_and_records_its_length_with_the_first_batch(
    kind: str, tmp_path: Path, minilm_engine
) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    store = _open(kind, tmp_path)
    seen_at_start = []

    def documents():  # read by the run once it has started
        spec = store.read_spec()
        seen_at_start.append(None if spec is None else (spec.sparse, spec.model_options[BM25_RECORD_KEY]))
        yield from read_paths([corpus])

    try:
        pipeline, _ = _pipeline(store, minilm_engine, tmp_path)
        pipeline.run(documents())
        assert seen_at_start == [
            ("bm25", {"avg_doc_length": None, "k1": K1, "b": B, "analyzer": {"name": "wordpiece"}})
        ]
        first = BM25Encoder(minilm_engine.tokenizer).term_counts(
            [c.text for c in _chunks(minilm_engine, corpus)[:4]]
        )
        recorded = store.read_spec().model_options[BM25_RECORD_KEY]["avg_doc_length"]
        assert recorded == pytest.approx(sum(sum(c.values()) for c in first) / 4)
    finally:
        store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_new_collection_takes_term_counts_from_the_cache_and_a_dense_run_is_refused(
    kind: str, tmp_path: Path, minilm_engine
) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    first = _open(kind, tmp_path, "one")
    try:
        _pipeline(first, minilm_engine, tmp_path)[0].run(read_paths([corpus]))
    finally:
        first.close()
    other = _open(kind, tmp_path, "two")
    try:
        pipeline, _ = _pipeline(other, minilm_engine, tmp_path, avg=10.0)
        report = pipeline.run(read_paths([corpus]))
        assert report.upserted > 0 and report.embedded == 0 and report.sparse_computed == 0
        assert other.read_spec().model_options[BM25_RECORD_KEY]["avg_doc_length"] == 10.0
        # A later run without --hybrid cannot join a collection with a sparse field.
        dense, _ = _pipeline(other, minilm_engine, tmp_path, hybrid=False)
        with pytest.raises(CollectionMismatchError, match="sparse field bm25 vs none") as refused:
            dense.run(read_paths([corpus]))
        assert "it was written with --hybrid, so run again with it, or use another" in str(refused.value)
    finally:
        other.close()


def test_a_later_run_adopts_the_recorded_average_not_its_own(tmp_path: Path, minilm_engine) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    store = _open("qdrant", tmp_path)
    try:
        _pipeline(store, minilm_engine, tmp_path, avg=7.5)[0].run(read_paths([corpus]))
        (tmp_path / "corpus" / "extra.txt").write_text(
            "Owls hunt at night with silent feathers and sharp ears."
        )
        pipeline, sparse = _pipeline(store, minilm_engine, tmp_path, avg=99.0)
        report = pipeline.run(read_paths([corpus]))
        assert report.upserted >= 1 and sparse.avg_doc_length == 7.5
    finally:
        store.close()


def test_term_counts_round_trip_through_the_cache(tmp_path: Path, minilm_engine) -> None:
    bm25 = BM25Encoder(minilm_engine.tokenizer)
    texts = ["Part XK-4471 fits the left hinge.", "", "the the the cat", "Part XK-4471 fits the left hinge."]
    cache = EmbeddingCache(tmp_path / "c.sqlite")
    counter = CachedTermCounter(bm25, "model@abc", cache)
    assert counter.term_counts(texts) == bm25.term_counts(texts)
    assert (counter.misses, counter.hits) == (3, 1)  # the repeated text is counted once
    fresh = CachedTermCounter(bm25, "model@abc", EmbeddingCache(tmp_path / "c.sqlite"))
    assert fresh.term_counts(texts) == bm25.term_counts(texts) and fresh.misses == 0
    other = CachedTermCounter(bm25, "model@other", EmbeddingCache(tmp_path / "c.sqlite"))
    other.term_counts(texts[:1])
    assert other.misses == 1  # another tokenizer never reads these counts


def test_bm25_for_model_uses_the_models_tokenizer(minilm_engine) -> None:
    encoder = bm25_for_model(minilm_engine.tokenizer, minilm_engine.facts.model_identity)
    assert encoder.kind == "bm25" and encoder.encoder.tokenizer is minilm_engine.tokenizer
    (query,) = encoder.encode_queries(["honeybee waggle dance"])
    assert set(query.values.tolist()) == {1.0}  # the store supplies IDF
