"""The six classes import from their LlamaIndex namespaces, and the namespaces stay shared."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("module", "name", "base"),
    [
        ("llama_index.embeddings.poolrag", "PoolragEmbedding", "BaseEmbedding"),
        ("llama_index.postprocessor.poolrag_rerank", "PoolragRerank", "BaseNodePostprocessor"),
        ("llama_index.retrievers.poolrag", "PoolragColBERTRetriever", "BaseRetriever"),
        ("llama_index.retrievers.poolrag", "PoolragHybridRetriever", "BaseRetriever"),
        ("llama_index.sparse_embeddings.poolrag", "PoolragSparseEmbedding", "BaseSparseEmbedding"),
        (
            "llama_index.sparse_embeddings.poolrag",
            "PoolragMilvusSparseEmbeddingFunction",
            "BaseSparseEmbeddingFunction",
        ),
    ],
)
def test_each_class_is_exported_from_its_namespace(module: str, name: str, base: str) -> None:
    imported = importlib.import_module(module)
    assert name in imported.__all__
    assert base in [cls.__name__ for cls in getattr(imported, name).__mro__]


def test_the_llama_index_namespaces_are_not_claimed() -> None:
    # An __init__.py in llama_index/ or llama_index/embeddings/ would shadow llama-index-core's.
    for folder in (
        "llama_index",
        "llama_index/embeddings",
        "llama_index/postprocessor",
        "llama_index/retrievers",
        "llama_index/sparse_embeddings",
    ):
        assert not (PACKAGE / folder / "__init__.py").exists(), folder
