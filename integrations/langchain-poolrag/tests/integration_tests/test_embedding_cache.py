"""PoolragEmbeddings with poolrag's on-disk embedding cache: unchanged texts are never embedded
twice, vectors equal the uncached ones, Matryoshka sizes are served from cached full vectors."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
from langchain_poolrag import PoolragEmbeddings

from poolrag import Engine, InvalidInputError
from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.testing.partner_fixtures import DOC
from poolrag.testing.rag_corpus import TEXTS


def test_unchanged_texts_are_read_from_disk(
    minilm_engine: Engine, engine_calls: list[list[str]], tmp_path: Path
) -> None:
    path = tmp_path / "embeddings.sqlite"
    first = PoolragEmbeddings(engine=minilm_engine, cache=EmbeddingCache(path))
    cold = first.embed_documents(TEXTS)
    assert engine_calls == [TEXTS]
    engine_calls.clear()
    uncached = PoolragEmbeddings(engine=minilm_engine).embed_documents(TEXTS)
    np.testing.assert_array_equal(cold, uncached)
    engine_calls.clear()

    second = PoolragEmbeddings(engine=minilm_engine, cache=str(path))  # another adapter, same file
    assert second.embed_documents(TEXTS) == cold
    assert engine_calls == []
    assert second.embed_documents([*TEXTS, "A new sentence."])[:-1] == cold
    assert engine_calls == [["A new sentence."]]


def test_queries_and_documents_are_cached_apart(
    minilm_engine: Engine, engine_calls: list[list[str]], tmp_path: Path
) -> None:
    embeddings = PoolragEmbeddings(engine=minilm_engine, cache=EmbeddingCache(tmp_path / "c.sqlite"))
    embeddings.embed_documents(["ocean"])
    embeddings.embed_query("ocean")  # another input type: another cache entry
    assert engine_calls == [["ocean"], ["ocean"]]
    engine_calls.clear()
    assert embeddings.embed_query("ocean") == PoolragEmbeddings(engine=minilm_engine).embed_query("ocean")


async def test_async_reads_the_same_cache(
    minilm_engine: Engine, engine_calls: list[list[str]], tmp_path: Path
) -> None:
    embeddings = PoolragEmbeddings(engine=minilm_engine, cache=EmbeddingCache(tmp_path / "c.sqlite"))
    cold = await embeddings.aembed_documents(TEXTS)
    engine_calls.clear()
    assert await embeddings.aembed_documents(TEXTS) == cold == embeddings.embed_documents(TEXTS)
    assert engine_calls == []


def test_matryoshka_sizes_come_from_cached_full_vectors(matryoshka_engine: Engine, tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "c.sqlite")
    PoolragEmbeddings(engine=matryoshka_engine, cache=cache).embed_documents(TEXTS)
    writes = cache.stats.writes
    small = PoolragEmbeddings(engine=matryoshka_engine, cache=cache, dimensions=128).embed_documents(TEXTS)
    assert cache.stats.writes == writes  # nothing new was embedded
    np.testing.assert_allclose(
        small, matryoshka_engine.embed_array(TEXTS, DOC.with_updates(dimensions=128)), atol=1e-6
    )


def test_a_cached_embedder_can_be_passed_as_is(minilm_engine: Engine, tmp_path: Path) -> None:
    embedder = CachedEmbedder(minilm_engine, EmbeddingCache(tmp_path / "c.sqlite"))
    embeddings = PoolragEmbeddings(cache=embedder)  # runs the embedder's own engine
    assert embeddings.backend is embedder
    embeddings.embed_documents(TEXTS)
    embeddings.embed_documents(TEXTS)
    assert (embedder.misses, embedder.hits) == (len(TEXTS), len(TEXTS))


def test_caches_that_cannot_apply_are_refused(
    minilm_engine: Engine, matryoshka_engine: Engine, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match="caches a model loaded in this process"):
        PoolragEmbeddings(base_url="http://127.0.0.1:9", cache=EmbeddingCache(tmp_path / "c.sqlite"))
    with pytest.raises(ValueError, match="another engine"):
        PoolragEmbeddings(engine=minilm_engine, cache=CachedEmbedder(matryoshka_engine, None))
    with pytest.raises(ValueError, match="cache must be"):
        PoolragEmbeddings(engine=minilm_engine, cache=42)


def test_a_refused_input_is_named_where_the_callers_list_has_it(
    minilm_engine: Engine, tmp_path: Path
) -> None:
    """Only the cache's misses reach the engine; the error still names the caller's index."""
    embeddings = PoolragEmbeddings(engine=minilm_engine, cache=EmbeddingCache(tmp_path / "c.sqlite"))
    embeddings.embed_documents(TEXTS[:2])
    texts = [*TEXTS[:2], "A new sentence.", "   "]
    with pytest.raises(InvalidInputError, match=r"^input\[3\] is empty"):
        embeddings.embed_documents(texts)
    with pytest.raises(InvalidInputError, match=r"^input\[3\] is empty"):
        asyncio.run(embeddings.aembed_documents(texts))
