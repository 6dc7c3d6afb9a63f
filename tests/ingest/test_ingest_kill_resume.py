"""``kill -9`` in the middle of ``poolrag ingest``, then run it again: it resumes and ends exactly
where a clean run would (same chunks, same vectors, no duplicates)."""

from __future__ import annotations

import signal
from pathlib import Path

import numpy as np
import pytest
from kill_resume import kill_mid_run, resume, store_kwargs, store_location, write_subject_corpus

from poolrag import PoolingParams
from poolrag.ingest import TokenChunker, read_paths
from poolrag.stores import open_store

FACT = "Fact {n} about {subject}: observers in region {region} recorded detail {reading} in their notes."


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "sig"),
    [("milvus", signal.SIGKILL), ("qdrant", signal.SIGKILL), ("qdrant", signal.SIGINT)],
    ids=["milvus-kill", "qdrant-kill", "qdrant-ctrl-c"],
)
def test_a_stopped_ingest_resumes_to_the_same_result_as_a_clean_run(
    kind: str, sig: signal.Signals, tmp_path: Path, minilm_engine
) -> None:
    corpus = write_subject_corpus(tmp_path / "corpus", FACT)
    checkpoint = tmp_path / "ingest.checkpoint.json"
    location = store_location(kind, tmp_path)
    args = [str(corpus), "--store", kind, *location, "--collection", "docs"]
    args += ["--chunk-tokens", "32", "--overlap", "4", "--batch-size", "2"]
    args += ["--cache", str(tmp_path / "cache.sqlite"), "--checkpoint", str(checkpoint), "--quiet", "--json"]

    done_before = kill_mid_run(args, checkpoint, sig)
    report = resume(args)

    chunker = TokenChunker(minilm_engine.tokenizer, max_tokens=32, overlap=4)
    chunks = [c for doc in read_paths([corpus]) for c in chunker.split(doc)]
    assert report["resumed"] is True and report["documents_skipped"] >= done_before
    assert report["embedded"] < len(chunks)  # what the killed run embedded came back from the cache
    assert not checkpoint.exists()

    store = open_store(kind, "docs", **store_kwargs(kind, location))
    try:
        assert store.count() == len(chunks)
        assert set(store.list_sources()) == {c.id for c in chunks}
        stored = store.fetch_vectors([c.id for c in chunks])
    finally:
        store.close()
    clean = minilm_engine.embed_array([c.text for c in chunks], PoolingParams(input_type="document"))
    got = np.stack([stored[c.id] for c in chunks])
    np.testing.assert_allclose(got, clean, atol=1e-5)
