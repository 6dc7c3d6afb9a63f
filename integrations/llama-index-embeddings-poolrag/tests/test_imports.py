"""The class imports from its LlamaIndex namespace,
and this distribution claims only its own leaf of the namespaces it shares with llama-index-core
and every other LlamaIndex integration."""

from __future__ import annotations

from pathlib import Path

from poolrag.testing.namespace_distribution import namespace_problems

PACKAGE = Path(__file__).resolve().parents[1]
MODULE = "llama_index.embeddings.poolrag"
CLASSES = {
    "PoolragEmbedding": "BaseEmbedding",
    "PoolragMultiModalEmbedding": "MultiModalEmbedding",
}


def test_the_classes_are_exported_from_the_leaf_and_the_shared_namespaces_stay_unclaimed() -> None:
    assert namespace_problems(PACKAGE, MODULE, CLASSES) == []
