"""Issue 45, item 2, at the ingest door: ingest never cuts a text. A paragraph over the model's length
(277 tokens for all-MiniLM-L6-v2, which reads 256) is split into chunks that fit, and each chunk is
stored with the vector ``Engine.embed_array`` and sentence-transformers give its text, so the
truncation default changes nothing here (the engine counts no input cut)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from poolrag import Engine
from poolrag.cache import CachedEmbedder
from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker, from_iterable
from poolrag.stores import open_store
from poolrag.testing.long_texts import long_paragraph


def test_long_paragraphs_are_chunked_not_cut_and_stored_with_the_engines_vectors(
    tmp_path: Path, minilm_engine: Engine, minilm_path: Path
) -> None:
    from sentence_transformers import SentenceTransformer

    documents = [(f"p{i}", long_paragraph(minilm_engine.tokenizer, i)) for i in range(3)]
    chunker = TokenChunker.for_model(minilm_engine.tokenizer, minilm_engine.facts)
    chunks = [chunk for document in from_iterable(documents) for chunk in chunker.split(document)]
    assert len(chunks) > len(documents)
    assert all(len(minilm_engine.tokenize(c.text)) <= minilm_engine.max_model_len for c in chunks)
    store = open_store("qdrant", "docs", path=str(tmp_path / "qdrant"))
    pipeline = IngestPipeline(
        store,
        DenseEncoder(CachedEmbedder(minilm_engine)),
        chunker,
        checkpoint_dir=tmp_path / "checkpoints",
        progress=False,
    )
    before = minilm_engine.core_stats.truncated_inputs
    assert pipeline.run(from_iterable(documents)).upserted == len(chunks)
    assert minilm_engine.core_stats.truncated_inputs == before
    stored = store.fetch_vectors([c.id for c in chunks])
    store.close()
    got = np.stack([stored[c.id] for c in chunks])
    texts = [c.text for c in chunks]
    np.testing.assert_allclose(got, minilm_engine.embed_array(texts), rtol=0, atol=1e-6)
    reference = SentenceTransformer(str(minilm_path), device="cpu").encode(texts)
    np.testing.assert_allclose(got, reference, rtol=0, atol=1e-6)
