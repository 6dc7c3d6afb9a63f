"""``kill -9`` in the middle of ``poolrag ingest --hybrid``, then run it again: it resumes, and the
collection holds exactly what a clean run writes, sparse vectors included (the average chunk
length the killed run recorded is the one the resumed run uses)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kill_resume import (
    kill_mid_run,
    resume,
    store_kwargs,
    store_location,
    stored_sparse,
    write_subject_corpus,
)

from poolrag.ingest import TokenChunker, read_paths
from poolrag.sparse.bm25 import BM25_RECORD_KEY, query_encoder_for_record
from poolrag.stores import open_store


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["milvus", "qdrant"])
def test_sigkilled_hybrid_ingest_resumes_to_the_clean_result(
    kind: str, tmp_path: Path, minilm_engine
) -> None:
    corpus = write_subject_corpus(tmp_path / "corpus")
    checkpoint = tmp_path / "ingest.checkpoint.json"
    location = store_location(kind, tmp_path)
    args = [str(corpus), "--store", kind, *location, "--collection", "docs", "--hybrid"]
    args += ["--chunk-tokens", "32", "--overlap", "4", "--batch-size", "2"]
    args += ["--cache", str(tmp_path / "cache.sqlite"), "--checkpoint", str(checkpoint), "--quiet", "--json"]

    done_before = kill_mid_run(args, checkpoint)
    report = resume(args)
    chunker = TokenChunker(minilm_engine.tokenizer, max_tokens=32, overlap=4)
    chunks = [c for doc in read_paths([corpus]) for c in chunker.split(doc)]
    assert report["resumed"] is True and report["documents_skipped"] >= done_before
    assert report["sparse_computed"] < len(chunks)  # the killed run's term counts came from the cache

    store = open_store(kind, "docs", **store_kwargs(kind, location))
    try:
        assert store.count() == len(chunks)
        assert set(store.list_sources()) == {c.id for c in chunks}
        recorded = store.read_spec().model_options[BM25_RECORD_KEY]
        stored = stored_sparse(store, kind, [c.id for c in chunks])
    finally:
        store.close()
    bm25 = query_encoder_for_record(recorded, minilm_engine.tokenizer)  # the analyzer ingest recorded
    counts = bm25.term_counts([c.text for c in chunks])
    # The first batch (two chunks of the first document) fixed the average length.
    assert recorded["avg_doc_length"] == pytest.approx(sum(sum(c.values()) for c in counts[:2]) / 2)
    clean = bm25.document_vectors(counts, recorded["avg_doc_length"])
    for chunk, want in zip(chunks, clean, strict=True):
        got = stored[chunk.id]
        assert sorted(got) == want.indices.tolist()
        np.testing.assert_allclose([got[t] for t in want.indices.tolist()], want.values, rtol=1e-6)
