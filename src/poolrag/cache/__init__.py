"""Embedding cache: content-addressed vectors on disk, around any PoolingBackend."""

from poolrag.cache.embedder import CachedEmbedder
from poolrag.cache.sqlite_store import CacheStats, EmbeddingCache, default_cache_path

__all__ = [
    "CacheStats",
    "CachedEmbedder",
    "EmbeddingCache",
    "default_cache_path",
]
