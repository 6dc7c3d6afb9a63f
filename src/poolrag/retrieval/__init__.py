"""Retrieval: the Matryoshka funnel (small-vector recall, full-vector re-score), sparse and hybrid
search, ColBERT MaxSim, and cross-encoder reranking."""

from poolrag.retrieval.colbert import ColbertRetriever
from poolrag.retrieval.funnel import Retriever
from poolrag.retrieval.rerank import CrossEncoderReranker
from poolrag.retrieval.results import SearchResult
from poolrag.retrieval.sparse_queries import SparseQueryEncoder

__all__ = ["ColbertRetriever", "CrossEncoderReranker", "Retriever", "SearchResult", "SparseQueryEncoder"]
