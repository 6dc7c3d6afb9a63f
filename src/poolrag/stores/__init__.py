"""Vector stores: Milvus (Lite or server), Qdrant (local mode or server), Qdrant Edge, and an
in-process store for callers without a database. Every search takes an optional metadata filter;
collections created with a sparse field also search sparse vectors and fuse hybrid searches."""

from __future__ import annotations

from poolrag.errors import InvalidInputError
from poolrag.stores.base import ChunkRecord, CollectionSpec, HybridFusion, SparseKind, StoreHit, VectorStore
from poolrag.stores.errors import (
    CollectionMismatchError,
    CollectionNotFoundError,
    StoreUnavailableError,
    UnsupportedStoreFeature,
)
from poolrag.stores.filters import MetadataFilter
from poolrag.stores.memory import InMemoryStore
from poolrag.stores.names import check_collection_name
from poolrag.stores.retry import RetryPolicy

STORE_KINDS = ("milvus", "qdrant", "qdrant-edge")


def open_store(
    kind: str,
    collection: str,
    *,
    uri: str | None = None,
    path: str | None = None,
    url: str | None = None,
    api_key: str | None = None,
    retry: RetryPolicy | None = None,
) -> VectorStore:
    """Open one collection of a store. The client libraries are imported only when used.

    ``milvus``: ``uri`` is a Milvus Lite file (default ``./poolrag_milvus.db``) or a server URL.
    ``qdrant``: ``path`` for local mode (default ``./poolrag_qdrant``) or ``url`` for a server.
    ``qdrant-edge``: ``path`` of the folder holding shards (default ``./poolrag_edge``).
    """
    check_collection_name(collection)
    if kind == "milvus":
        if path is not None or url is not None:
            raise InvalidInputError("milvus takes --uri (a .db file or a server URL), not --path/--url")
        from poolrag.stores.milvus import DEFAULT_URI, MilvusStore

        return MilvusStore(collection, uri or DEFAULT_URI, token=api_key or "", retry=retry)
    if kind == "qdrant":
        if uri is not None:
            raise InvalidInputError("qdrant takes --path (local mode) or --url (server), not --uri")
        from poolrag.stores.qdrant import QdrantStore

        return QdrantStore(collection, path=path, url=url, api_key=api_key, retry=retry)
    if kind == "qdrant-edge":
        if uri is not None or url is not None:
            raise InvalidInputError("qdrant-edge runs in-process: give --path, not --uri/--url")
        from poolrag.stores.qdrant_edge import QdrantEdgeStore

        return QdrantEdgeStore(collection, path=path, retry=retry)
    raise InvalidInputError(f"unknown store {kind!r}; choose one of {', '.join(STORE_KINDS)}")


__all__ = [
    "STORE_KINDS",
    "ChunkRecord",
    "CollectionMismatchError",
    "CollectionNotFoundError",
    "CollectionSpec",
    "HybridFusion",
    "InMemoryStore",
    "MetadataFilter",
    "RetryPolicy",
    "SparseKind",
    "StoreHit",
    "StoreUnavailableError",
    "UnsupportedStoreFeature",
    "VectorStore",
    "check_collection_name",
    "open_store",
]
