"""Learned sparse vectors through the cache: only the texts it lacks reach the model, and an input
the model refuses is named where the caller's list has it, not where the misses do."""

from __future__ import annotations

from pathlib import Path

import pytest

from poolrag import Engine, InputTooLongError, PoolingParams
from poolrag.cache.sparse_vectors import CachedSparseVectors
from poolrag.cache.sqlite_store import EmbeddingCache
from poolrag.testing.tiny_models import build_splade


def test_a_refused_text_is_named_where_the_callers_list_has_it(tmp_path: Path, minilm_path: Path) -> None:
    engine = Engine(build_splade(tmp_path / "splade", minilm_path), truncate=False)
    params = PoolingParams(input_type="document")
    vectors = CachedSparseVectors(
        engine.facts, params, lambda texts: engine.sparse_embed(texts, params), EmbeddingCache(tmp_path / "c")
    )
    vectors.vectors(["The cat sat on the mat."])
    texts = ["The cat sat on the mat.", "Fresh text.", "word " * 1000]
    with pytest.raises(InputTooLongError) as expected:
        engine.sparse_embed(texts, params)
    with pytest.raises(InputTooLongError) as caught:
        vectors.vectors(texts)
    assert str(caught.value) == str(expected.value) and caught.value.index == 2
    assert vectors.misses == 1  # the refused call stored nothing
