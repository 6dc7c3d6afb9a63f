"""``kill -9`` in the middle of ``poolrag ingest --hybrid`` with a learned sparse source (a tiny SPLADE as
``--sparse-model`` beside MiniLM, or a tiny BGE-M3's own sparse head), then run it again: it resumes,
takes the killed run's sparse vectors from the cache, and the collection holds exactly the engine's
own sparse vectors for every chunk."""

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

from poolrag import Engine
from poolrag.ingest import TokenChunker, read_paths
from poolrag.ingest.sparse_encoders import LEARNED_SPARSE_OPTIONS_KEY
from poolrag.params import PoolingParams
from poolrag.stores import open_store
from poolrag.testing.tiny_models import build_bge_m3, build_splade


# each source and each store once: a store keeps a learned sparse vector the same way whichever
# model made it (tests/stores), and a source computes it the same way whichever store takes it
@pytest.mark.slow
@pytest.mark.parametrize(("kind", "source"), [("milvus", "splade"), ("qdrant", "bge-m3")])
def test_sigkilled_learned_sparse_ingest_resumes_to_the_clean_result(
    kind: str, source: str, tmp_path: Path, minilm_path: Path
) -> None:
    if source == "splade":
        main_path, sparse_path = minilm_path, build_splade(tmp_path / "splade", minilm_path)
        flags = ["--model", str(main_path), "--sparse-model", str(sparse_path)]
    else:
        main_path = sparse_path = build_bge_m3(tmp_path / "m3", minilm_path)
        flags = ["--model", str(main_path)]
    corpus = write_subject_corpus(tmp_path / "corpus")
    checkpoint = tmp_path / "ingest.checkpoint.json"
    location = store_location(kind, tmp_path)
    args = [str(corpus), "--store", kind, *location, "--collection", "docs", "--hybrid", *flags]
    args += ["--chunk-tokens", "32", "--overlap", "4", "--batch-size", "2"]
    args += ["--cache", str(tmp_path / "cache.sqlite"), "--checkpoint", str(checkpoint), "--quiet", "--json"]

    done_before = kill_mid_run(args, checkpoint)
    report = resume(args)
    main_engine = Engine(main_path)
    sparse_engine = main_engine if sparse_path == main_path else Engine(sparse_path)
    chunker = TokenChunker(main_engine.tokenizer, max_tokens=32, overlap=4)
    chunks = [c for doc in read_paths([corpus]) for c in chunker.split(doc)]
    assert report["resumed"] is True and report["documents_skipped"] >= done_before
    assert report["collection"]["sparse"] == "learned"
    # The killed run's chunks are in the store; what it computed beyond them came from the cache.
    # Dense and sparse vectors are cached one after the other, so a kill between the two writes
    # leaves one batch (2 chunks) cached for one of them only: the resumed run computes it again.
    assert report["embedded"] < len(chunks) and report["sparse_computed"] < len(chunks)
    assert abs(report["sparse_computed"] - report["embedded"]) <= 2

    store = open_store(kind, "docs", **store_kwargs(kind, location))
    try:
        assert store.count() == len(chunks)
        assert set(store.list_sources()) == {c.id for c in chunks}
        recorded = store.read_spec().model_options[LEARNED_SPARSE_OPTIONS_KEY]
        stored = stored_sparse(store, kind, [c.id for c in chunks])
    finally:
        store.close()
    assert recorded["model_identity"] == sparse_engine.facts.model_identity
    clean = sparse_engine.sparse_embed([c.text for c in chunks], PoolingParams(input_type="document"))
    for chunk, want in zip(chunks, clean, strict=True):
        got = stored[chunk.id]
        assert sorted(got) == want.indices.tolist()
        np.testing.assert_allclose([got[t] for t in want.indices.tolist()], want.values, rtol=1e-5, atol=1e-6)
