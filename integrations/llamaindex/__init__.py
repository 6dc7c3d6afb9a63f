"""LlamaIndex adapters: an embedding model, a reranking node postprocessor and a ColBERT retriever."""

from integrations.llamaindex.colbert_retriever import PoolragColBERTRetriever
from integrations.llamaindex.embeddings import PoolragEmbedding
from integrations.llamaindex.reranker import PoolragRerank

__all__ = ["PoolragColBERTRetriever", "PoolragEmbedding", "PoolragRerank"]
