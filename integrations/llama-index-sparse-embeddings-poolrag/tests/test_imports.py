"""The two sparse classes import from their LlamaIndex namespace,
and this distribution claims only its own leaf of the namespaces it shares with llama-index-core
and every other LlamaIndex integration."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1]
MODULE = "llama_index.sparse_embeddings.poolrag"


@pytest.mark.parametrize(
    ("name", "base"),
    [
        ("PoolragSparseEmbedding", "BaseSparseEmbedding"),
        ("PoolragMilvusSparseEmbeddingFunction", "BaseSparseEmbeddingFunction"),
    ],
)
def test_the_class_is_exported_from_its_namespace(name: str, base: str) -> None:
    imported = importlib.import_module(MODULE)
    assert name in imported.__all__
    assert base in [cls.__name__ for cls in getattr(imported, name).__mro__]


def test_the_llama_index_namespaces_are_not_claimed() -> None:
    # An __init__.py in llama_index/ or llama_index/sparse_embeddings/ would shadow llama-index-core's.
    for folder in ("llama_index", "llama_index/sparse_embeddings"):
        assert not (PACKAGE / folder / "__init__.py").exists(), folder
    assert (PACKAGE / MODULE.replace(".", "/") / "__init__.py").is_file()
