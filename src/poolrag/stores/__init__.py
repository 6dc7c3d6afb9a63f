"""Vector stores: Milvus (Lite or server), Qdrant (local mode or server), Qdrant Edge, and an
in-process store for callers without a database. Every search takes an optional metadata filter;
collections created with a sparse field also search sparse vectors and fuse hybrid searches."""

from __future__ import annotations

from poolrag.stores.base import ChunkRecord, CollectionSpec, HybridFusion, SparseKind, StoreHit, VectorStore
from poolrag.stores.errors import (
    CollectionMismatchError,
    CollectionNotFoundError,
    StoreRequestError,
    StoreUnavailableError,
    UnsupportedStoreFeature,
)
from poolrag.stores.filters import MetadataFilter
from poolrag.stores.memory import InMemoryStore
from poolrag.stores.names import check_collection_name
from poolrag.stores.registry import STORES, StoreEntry, StoreLocation, open_store, store_kinds
from poolrag.stores.retry import RetryPolicy
from poolrag.stores.template import StoreTemplate

__all__ = [
    "STORES",
    "ChunkRecord",
    "CollectionMismatchError",
    "CollectionNotFoundError",
    "CollectionSpec",
    "HybridFusion",
    "InMemoryStore",
    "MetadataFilter",
    "RetryPolicy",
    "SparseKind",
    "StoreEntry",
    "StoreHit",
    "StoreLocation",
    "StoreRequestError",
    "StoreTemplate",
    "StoreUnavailableError",
    "UnsupportedStoreFeature",
    "VectorStore",
    "check_collection_name",
    "open_store",
    "store_kinds",
]
