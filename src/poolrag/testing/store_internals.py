"""The documented way for tests to reach the client a store drives.

What a store sends its database (the deadline on a write, say) is a contract of the store, but the
client is private so that the ingest and the server depend only on the store's methods. Tests that
check what the real client calls carry reach it here, the one place besides the store that knows
where it is kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from poolrag.stores.milvus import MilvusStore


def milvus_client(store: MilvusStore) -> Any:
    """The ``pymilvus.MilvusClient`` the store calls (Milvus Lite in this process, or a server)."""
    return store._client


def raw_points(store: Any) -> dict[str, tuple[np.ndarray, dict[str, Any]]]:
    """Every chunk's dense vector and payload as the database itself returns them (nothing decoded by
    poolrag), by the id the store's hits carry: what a client of that database reading it would get."""
    if store.name == "memory":
        return {i: (vector, payload) for i, (vector, payload) in store._records.items()}
    if store.name == "qdrant":
        points, _ = store._client.scroll(store.collection, limit=100_000, with_vectors=True)
    elif store.name == "qdrant-edge":
        import qdrant_edge as qe

        request = qe.ScrollRequest(limit=100_000, with_payload=True, with_vector=True)
        points, _ = store._shard.scroll(request)
    else:
        raise ValueError(f"no raw reader for the {store.name} store")
    return {str(p.id): (np.asarray(p.vector, dtype=np.float32), dict(p.payload or {})) for p in points}


def raw_dense_vectors(store: Any, ids: list[str]) -> np.ndarray:
    """:func:`raw_points`' vectors of ``ids``, one row per id in order."""
    points = raw_points(store)
    return np.array([points[i][0] for i in ids], dtype=np.float32)
