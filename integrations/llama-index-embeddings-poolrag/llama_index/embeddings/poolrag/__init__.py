from llama_index.embeddings.poolrag.base import PoolragEmbedding

__all__ = ["PoolragEmbedding"]
