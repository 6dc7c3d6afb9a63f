from llama_index.postprocessor.poolrag_rerank.base import PoolragRerank

__all__ = ["PoolragRerank"]
