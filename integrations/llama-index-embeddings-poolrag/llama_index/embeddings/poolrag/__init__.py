from llama_index.embeddings.poolrag.base import PoolragEmbedding
from llama_index.embeddings.poolrag.multi_modal import PoolragMultiModalEmbedding

__all__ = ["PoolragEmbedding", "PoolragMultiModalEmbedding"]
