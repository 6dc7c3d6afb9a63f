"""Embedding cache: content-addressed vectors on disk, shared by ingestion, retrieval and adapters."""

from poolrag.cache.embedder import CachedEmbedder
from poolrag.cache.matryoshka import check_dimensions, truncate
from poolrag.cache.sqlite_store import CacheStats, EmbeddingCache, default_cache_path

__all__ = [
    "CacheStats",
    "CachedEmbedder",
    "EmbeddingCache",
    "check_dimensions",
    "default_cache_path",
    "truncate",
]
