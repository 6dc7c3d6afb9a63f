"""LangChain adapters: embeddings, a reranking document compressor and a ColBERT retriever."""

from integrations.langchain.colbert_retriever import PoolragColBERTRetriever
from integrations.langchain.embeddings import PoolragEmbeddings
from integrations.langchain.reranker import PoolragReranker

__all__ = ["PoolragColBERTRetriever", "PoolragEmbeddings", "PoolragReranker"]
