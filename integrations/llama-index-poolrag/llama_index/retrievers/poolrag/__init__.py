from llama_index.retrievers.poolrag.base import PoolragColBERTRetriever

__all__ = ["PoolragColBERTRetriever"]
