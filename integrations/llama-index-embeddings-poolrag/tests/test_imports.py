"""The class imports from its LlamaIndex namespace,
and this distribution claims only its own leaf of the namespaces it shares with llama-index-core
and every other LlamaIndex integration."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1]
MODULE = "llama_index.embeddings.poolrag"


@pytest.mark.parametrize(
    ("name", "base"),
    [
        ("PoolragEmbedding", "BaseEmbedding"),
    ],
)
def test_the_class_is_exported_from_its_namespace(name: str, base: str) -> None:
    imported = importlib.import_module(MODULE)
    assert name in imported.__all__
    assert base in [cls.__name__ for cls in getattr(imported, name).__mro__]


def test_the_llama_index_namespaces_are_not_claimed() -> None:
    # An __init__.py in llama_index/ or llama_index/embeddings/ would shadow llama-index-core's.
    for folder in ("llama_index", "llama_index/embeddings"):
        assert not (PACKAGE / folder / "__init__.py").exists(), folder
    assert (PACKAGE / MODULE.replace(".", "/") / "__init__.py").is_file()
