"""``IngestPipeline(late_chunking=True)`` / ``poolrag ingest --late-chunking`` against real Milvus Lite
and Qdrant local mode: the rows, ids and payloads of a normal ingest, with each chunk's vector
pooled from one pass over its whole document; resumable; cached apart from per-chunk vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ingest_support import write_corpus

from poolrag import Engine
from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.cli import main
from poolrag.errors import InvalidInputError
from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker, read_paths
from poolrag.params import PoolingParams
from poolrag.stores import RetryPolicy, open_store
from poolrag.stores.errors import CollectionMismatchError

FAST_RETRY = RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.02)
KINDS = ["milvus", "qdrant"]


def _location(kind: str, root: Path) -> dict[str, str]:
    return {"uri": str(root / "milvus.db")} if kind == "milvus" else {"path": str(root / kind)}


def _ingest(kind: str, root: Path, corpus: Path, engine, collection: str, late: bool, cache: Path):
    store = open_store(kind, collection, retry=FAST_RETRY, **_location(kind, root))
    try:
        return _fill(store, corpus, engine, root, late, cache)
    except BaseException:
        store.close()  # a refused run leaves the collection to the next opener
        raise


def _fill(store, corpus: Path, engine, root: Path, late: bool, cache: Path):
    with EmbeddingCache(cache) as opened:
        embedder = CachedEmbedder(engine, opened)
        pipe = IngestPipeline(
            store,
            DenseEncoder(embedder),
            TokenChunker(engine.tokenizer, max_tokens=16, overlap=4),
            batch_size=3,  # a document's chunks fall into two batches: each batch pools from the whole text
            checkpoint_dir=root / "ck",
            progress=False,
            late_chunking=late,
        )
        report = pipe.run(read_paths([corpus]))
        ids = sorted(store.list_sources())
        vectors = store.fetch_vectors(ids)
    return report, store, ids, vectors, embedder


def _late_vectors(engine, document: str, chunks) -> np.ndarray:
    spans = [(c.start, c.end) for c in chunks]
    return engine.embed_chunks(document, spans, PoolingParams(input_type="document"))


def _by_span(store, vectors: dict) -> dict:
    """(source, start) → (payload, vector) of every stored chunk."""
    query = next(iter(vectors.values()))
    hits = store.search(query, len(vectors) + 10)
    assert len(hits) == len(vectors)
    return {(h.payload["source"], h.payload["start"]): (h.payload, vectors[h.id]) for h in hits}


@pytest.mark.parametrize("kind", KINDS)
def test_late_chunking_stores_the_normal_rows_with_whole_document_vectors(
    kind: str, tmp_path: Path, minilm_engine
) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    cache = tmp_path / "cache.sqlite"
    plain, plain_store, plain_ids, plain_vectors, _ = _ingest(
        kind, tmp_path, corpus, minilm_engine, "plain", False, cache
    )
    late, late_store, late_ids, late_vectors, embedder = _ingest(
        kind, tmp_path, corpus, minilm_engine, "late", True, cache
    )
    # the same chunks; per-chunk cache entries never answer for late vectors
    assert late.chunks == plain.chunks == len(late_ids) == len(plain_ids)
    assert late.embedded == len(late_ids) and embedder.hits == 0
    # each vector is the engine's late chunk vector of its span within its whole document
    late_by_span = _by_span(late_store, late_vectors)
    plain_by_span = _by_span(plain_store, plain_vectors)
    assert late_by_span.keys() == plain_by_span.keys()
    chunker = TokenChunker(minilm_engine.tokenizer, max_tokens=16, overlap=4)
    for doc in read_paths([corpus]):
        chunks = chunker.split(doc)
        assert len(chunks) > 3
        for chunk, vector in zip(chunks, _late_vectors(minilm_engine, doc.text, chunks), strict=True):
            np.testing.assert_allclose(late_by_span[chunk.source, chunk.start][1], vector, atol=1e-5)
            assert not np.allclose(plain_by_span[chunk.source, chunk.start][1], vector, atol=1e-3)
    # the payloads (text, source, offsets) are those of a normal ingest
    assert {k: p for k, (p, _) in late_by_span.items()} == {k: p for k, (p, _) in plain_by_span.items()}
    plain_store.close()
    late_store.close()

    # a re-run adds nothing; into a new collection every late vector comes from the cache
    again, store, _, _, embedder = _ingest(kind, tmp_path, corpus, minilm_engine, "late", True, cache)
    assert again.chunks_existing == len(late_ids) and again.embedded == 0
    store.close()
    fresh, store, _, vectors, embedder = _ingest(kind, tmp_path, corpus, minilm_engine, "late2", True, cache)
    assert fresh.embedded == 0 and embedder.hits == len(late_ids)
    for chunk_id, vector in vectors.items():
        np.testing.assert_array_equal(vector, late_vectors[chunk_id])
    store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_an_edited_document_gets_every_late_vector_again_none_left_from_before_the_edit(
    kind: str, tmp_path: Path, minilm_engine
) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    cache = tmp_path / "cache.sqlite"
    first, store, _, _, _ = _ingest(kind, tmp_path, corpus, minilm_engine, "late", True, cache)
    store.close()
    edited = sorted(corpus.iterdir())[0]
    edited.write_text(f"{edited.read_text()}\n\nA closing paragraph added later changes every vector above.")
    again, store, ids, vectors, _ = _ingest(kind, tmp_path, corpus, minilm_engine, "late", True, cache)
    try:
        chunker = TokenChunker(minilm_engine.tokenizer, max_tokens=16, overlap=4)
        chunks = chunker.split(next(d for d in read_paths([corpus]) if Path(d.source).name == edited.name))
        # the edited document's chunks are all embedded again, its old rows deleted
        assert again.embedded == len(chunks) and again.deleted == len(chunks) - 1
        assert len(ids) == first.chunks + 1
        stored = _by_span(store, vectors)
        expected = _late_vectors(minilm_engine, edited.read_text(), chunks)
        for chunk, vector in zip(chunks, expected, strict=True):
            np.testing.assert_allclose(stored[chunk.source, chunk.start][1], vector, atol=1e-5)
    finally:
        store.close()


def test_cli_late_chunking_ingests_and_refuses_what_it_cannot_do(
    tmp_path: Path, capsys, tiny_model, assets: Path
) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    common = ["--uri", str(tmp_path / "m.db"), "--cache", str(tmp_path / "c.sqlite"), "--quiet", "--json"]
    assert main(["ingest", str(corpus), "--late-chunking", "--chunk-tokens", "16", *common]) == 0
    assert '"embedded"' in capsys.readouterr().out

    assert main(["ingest", str(corpus), "--late-chunking", "--hybrid", *common]) == 2
    assert "--late-chunking runs in this process with dense vectors" in capsys.readouterr().err
    cls_model = tiny_model("bert")  # a bare BERT pools by CLS
    assert main(["ingest", str(corpus), "--late-chunking", "--model", str(cls_model), *common]) == 2
    err = capsys.readouterr().err
    assert "needs a mean-pooling model" in err and "pools by CLS" in err
    colbert = ["--model", str(assets / "colbert-pylate")]  # pools nothing: not its config's CLS default
    assert main(["ingest", str(corpus), "--late-chunking", *colbert, *common]) == 2
    err = capsys.readouterr().err
    assert "this model is ColBERT, which keeps one vector per token" in err and "pools by" not in err


def test_a_model_that_cannot_late_chunk_is_refused_before_the_collection_records_late_vectors(
    tmp_path: Path, tiny_model, minilm_engine
) -> None:
    """Refused at the first batch, the run had made a collection marked "late", which then refused
    the same corpus ingested the ordinary way."""
    corpus = write_corpus(tmp_path / "corpus")
    cls_engine = Engine(tiny_model("bert"))  # a bare BERT pools by CLS
    with pytest.raises(
        InvalidInputError, match="late-chunking needs a mean-pooling model; this model pools by CLS"
    ):
        _ingest("qdrant", tmp_path, corpus, cls_engine, "docs", True, tmp_path / "cls.sqlite")
    store = open_store("qdrant", "docs", **_location("qdrant", tmp_path))
    try:
        assert store.read_spec() is None
    finally:
        store.close()
    report, store, *_ = _ingest(
        "qdrant", tmp_path, corpus, minilm_engine, "docs", False, tmp_path / "c.sqlite"
    )
    store.close()
    assert report.upserted > 0


@pytest.mark.parametrize("kind", KINDS)
def test_a_collection_records_late_vectors_and_never_mixes_them_with_per_chunk_ones(
    kind: str, tmp_path: Path, minilm_engine
) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    cache = tmp_path / "cache.sqlite"
    _, late_store, late_ids, _, _ = _ingest(kind, tmp_path, corpus, minilm_engine, "late", True, cache)
    _, plain_store, _, _, _ = _ingest(kind, tmp_path, corpus, minilm_engine, "plain", False, cache)
    assert (late_store.read_spec().chunk_vectors, plain_store.read_spec().chunk_vectors) == (
        "late",
        "per_chunk",
    )
    for store in (late_store, plain_store):
        store.close()
    with pytest.raises(
        CollectionMismatchError, match=r"late-chunked vectors \(--late-chunking\) vs chunks embedded"
    ):
        _ingest(kind, tmp_path, corpus, minilm_engine, "late", False, cache)
    with pytest.raises(CollectionMismatchError, match=r"chunks embedded one by one vs late-chunked"):
        _ingest(kind, tmp_path, corpus, minilm_engine, "plain", True, cache)
    reopened = open_store(kind, "late", retry=FAST_RETRY, **_location(kind, tmp_path))
    try:
        assert sorted(reopened.list_sources()) == late_ids  # the refused runs stored nothing
    finally:
        reopened.close()


def test_the_cli_refuses_the_other_kind_in_one_line(tmp_path: Path, capsys) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    common = ["--uri", str(tmp_path / "m.db"), "--cache", str(tmp_path / "c.sqlite"), "--quiet"]
    assert main(["ingest", str(corpus), "--chunk-tokens", "16", *common]) == 0
    assert main(["ingest", str(corpus), "--late-chunking", "--chunk-tokens", "16", *common]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("poolrag ingest: error:") and "\n" not in err
    assert "chunks embedded one by one vs late-chunked vectors (--late-chunking)" in err
