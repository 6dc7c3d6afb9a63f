"""``--hybrid`` on Ray: the BM25 leg the actors write is the single-process run's, row for row.

Both runs go through the one ingest driver; here the stores they fill are read back and compared:
the same ids and sources, dense vectors to 1e-6, the same sparse vectors, the same recorded BM25
settings (the mean length fixed from the same first batch) and the same report, in Milvus Lite and
Qdrant local mode.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kill_resume import stored_sparse
from test_ray_ingest import CHUNK_TOKENS, OVERLAP, contents, location, write_corpus

from poolrag.cache import CachedEmbedder
from poolrag.errors import InvalidInputError
from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker, read_paths
from poolrag.ingest.sparse_encoders import bm25_for_model, collection_languages
from poolrag.scaleout.ray_ingest import BM25Recipe, EngineRecipe, RayIngestOptions, ingest_on_ray
from poolrag.sparse.bm25 import BM25_RECORD_KEY
from poolrag.sparse.words import WordAnalyzer
from poolrag.stores import open_store
from poolrag.testing.tiny_models import build_bge_m3

BATCH = 16  # chunks per batch: BM25's mean length comes from the first one
SAME_IN_BOTH = ("documents", "documents_skipped", "chunks", "chunks_existing", "upserted", "deleted")


def single_process_run(engine, corpus: Path, store, root: Path):
    chunker = TokenChunker.for_model(engine.tokenizer, engine.facts, CHUNK_TOKENS, OVERLAP)
    languages = collection_languages(engine.spec.path, "english")  # as `poolrag ingest --language english`
    sparse = bm25_for_model(
        engine.tokenizer, engine.facts.model_identity, None, WordAnalyzer("english"), languages
    )
    pipeline = IngestPipeline(
        store,
        DenseEncoder(CachedEmbedder(engine, None)),
        chunker,
        batch_size=BATCH,
        checkpoint_dir=root / "ck",
        progress=False,
        sparse_encoder=sparse,
    )
    return pipeline.run(read_paths([corpus]))


def stored_rows(store, kind: str) -> tuple[dict, dict, dict]:
    """Ids → (source, dense vector), ids → sparse vector, and the recorded BM25 settings."""
    dense = contents(store)
    return dense, stored_sparse(store, kind, list(dense)), store.read_spec().model_options[BM25_RECORD_KEY]


@pytest.mark.parametrize("kind", ["milvus", "qdrant"])
def test_ray_hybrid_stores_the_single_process_rows(
    ray_cluster, minilm_engine, minilm_path: Path, kind: str, tmp_path: Path
) -> None:
    corpus = write_corpus(tmp_path / "corpus", files=8)
    (tmp_path / "local").mkdir()
    (tmp_path / "ray").mkdir()
    local = open_store(kind, "docs", **location(kind, tmp_path / "local"))
    on_ray = open_store(kind, "docs", **location(kind, tmp_path / "ray"))
    try:
        want_report = single_process_run(minilm_engine, corpus, local, tmp_path / "local")
        got_report = ingest_on_ray(
            read_paths([corpus]),
            on_ray,
            EngineRecipe(str(minilm_path), chunk_tokens=CHUNK_TOKENS, overlap=OVERLAP),
            options=RayIngestOptions(workers=2, documents_per_batch=2, write_batch=BATCH),
            bm25=BM25Recipe("words", "english"),
            checkpoint_dir=tmp_path / "ray" / "ck",
        )
        want_dense, want_sparse, want_bm25 = stored_rows(local, kind)
        got_dense, got_sparse, got_bm25 = stored_rows(on_ray, kind)
    finally:
        local.close()
        on_ray.close()

    assert want_report.chunks > BATCH  # more than the first batch, so the mean length is a real choice
    for name in SAME_IN_BOTH:
        assert getattr(got_report, name) == getattr(want_report, name), name
    assert got_report.collection == want_report.collection
    assert want_report.collection == {"name": "docs", "dimension": 384, "sparse": "bm25"}
    assert got_report.embedded == got_report.sparse_computed == got_report.upserted
    assert got_bm25 == want_bm25 and want_bm25["analyzer"]["name"] == "words"
    assert got_dense.keys() == want_dense.keys()
    for cid, (source, vector) in want_dense.items():
        assert got_dense[cid][0] == source
        np.testing.assert_allclose(got_dense[cid][1], vector, atol=1e-6, rtol=0)
    assert got_sparse == want_sparse
    assert all(want_sparse.values())  # every chunk has terms: the comparison is not of empty vectors


def test_a_model_with_its_own_sparse_head_is_refused_in_one_line(
    ray_cluster, minilm_path: Path, tmp_path: Path
) -> None:
    """--hybrid would use that head on one machine; Ray makes BM25 only, so it refuses rather than
    write other sparse vectors than the single-process run."""
    model = build_bge_m3(tmp_path / "m3", minilm_path)
    store = open_store("qdrant", "docs", path=str(tmp_path / "q"))
    try:
        with pytest.raises(InvalidInputError, match=r"has its own sparse head.*without --ray"):
            ingest_on_ray(
                read_paths([write_corpus(tmp_path / "corpus", files=1)]),
                store,
                EngineRecipe(str(model)),
                bm25=BM25Recipe("words", "english"),
                checkpoint_dir=tmp_path / "ck",
            )
        assert store.read_spec() is None  # refused before the collection was made
    finally:
        store.close()
