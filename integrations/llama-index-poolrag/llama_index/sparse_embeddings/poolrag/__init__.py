from llama_index.sparse_embeddings.poolrag.base import PoolragSparseEmbedding

__all__ = ["PoolragSparseEmbedding"]
