"""The documented way for tests to reach the client a store drives.

What a store sends its database (the deadline on a write, say) is a contract of the store, but the
client is private so that the ingest and the server depend only on the store's methods. Tests that
check what the real client calls carry reach it here, the one place besides the store that knows
where it is kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from poolrag.stores.milvus import MilvusStore


def milvus_client(store: MilvusStore) -> Any:
    """The ``pymilvus.MilvusClient`` the store calls (Milvus Lite in this process, or a server)."""
    return store._client
