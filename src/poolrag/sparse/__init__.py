"""Sparse vectors (token id → weight) for hybrid search, and the lexical BM25 encoder that makes
them from any model's tokenizer or from a search engine's word analyzer."""

from poolrag.sparse.bm25 import BM25Encoder, BM25Parameters, BM25Stats, TermCounts
from poolrag.sparse.vector import SparseVector
from poolrag.sparse.words import WordAnalyzer

__all__ = ["BM25Encoder", "BM25Parameters", "BM25Stats", "SparseVector", "TermCounts", "WordAnalyzer"]
