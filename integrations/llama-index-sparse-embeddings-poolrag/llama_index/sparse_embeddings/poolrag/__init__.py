from typing import Any

from llama_index.sparse_embeddings.poolrag.base import PoolragSparseEmbedding

__all__ = ["PoolragMilvusSparseEmbeddingFunction", "PoolragSparseEmbedding"]


def __getattr__(name: str) -> Any:
    """Import the Milvus class on first use: it needs the optional llama-index-vector-stores-milvus."""
    if name == "PoolragMilvusSparseEmbeddingFunction":
        from llama_index.sparse_embeddings.poolrag.milvus import PoolragMilvusSparseEmbeddingFunction

        return PoolragMilvusSparseEmbeddingFunction
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
