from llama_index.retrievers.poolrag.base import PoolragColBERTRetriever
from llama_index.retrievers.poolrag.hybrid import PoolragHybridRetriever

__all__ = ["PoolragColBERTRetriever", "PoolragHybridRetriever"]
