from typing import TYPE_CHECKING, Any

from llama_index.sparse_embeddings.poolrag.base import PoolragSparseEmbedding

from poolrag.frameworks.optional_classes import optional_class

if TYPE_CHECKING:
    from llama_index.sparse_embeddings.poolrag.milvus import PoolragMilvusSparseEmbeddingFunction

__all__ = ["PoolragMilvusSparseEmbeddingFunction", "PoolragSparseEmbedding"]


if not TYPE_CHECKING:  # a checker reads the imports above instead, so a misspelt name is an error there

    def __getattr__(name: str) -> Any:
        """Import the Milvus class on first use: it needs the optional llama-index-vector-stores-milvus
        (without it, a stand-in that names the extra when constructed)."""
        if name == "PoolragMilvusSparseEmbeddingFunction":
            return optional_class(
                "llama_index.sparse_embeddings.poolrag.milvus", name, "llama_index.vector_stores.milvus"
            )
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
