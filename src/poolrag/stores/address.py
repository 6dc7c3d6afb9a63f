"""Where a store lives, as data: what the CLI flags name, and what another process (a Ray actor)
opens the same collection from.

A store object holds a live client and cannot travel to another process; its address can. Only a
server (a Milvus or Qdrant URL) takes writes from several processes: a Milvus Lite file or a
Qdrant local folder is opened by one process at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from poolrag.stores.base import VectorStore
from poolrag.stores.retry import RetryPolicy


@dataclass(frozen=True)
class StoreAddress:
    """The arguments of :func:`poolrag.stores.open_store` for one collection."""

    kind: str
    collection: str
    uri: str | None = None
    path: str | None = None
    url: str | None = None
    api_key: str | None = None
    retry: RetryPolicy | None = None

    @property
    def served(self) -> bool:
        """Whether a server holds the collection (it takes writes from many processes at once)."""
        if self.kind == "milvus":
            return self.uri is not None and "://" in self.uri
        return self.kind == "qdrant" and self.url is not None

    def local_data(self) -> Path | None:
        """The file or folder an embedded store keeps its data in (``None`` for a server, or where
        the flags name no embedded store: opening refuses those): what a reader checks before
        opening, since opening an embedded store creates it."""
        if self.served:
            return None
        if self.kind == "milvus" and self.path is None and self.url is None:
            from poolrag.stores.milvus import DEFAULT_URI

            return Path(self.uri or DEFAULT_URI)
        if self.kind == "qdrant" and self.uri is None:
            from poolrag.stores.qdrant import DEFAULT_PATH

            return Path(self.path or DEFAULT_PATH)
        if self.kind == "qdrant-edge" and self.uri is None and self.url is None:
            from poolrag.stores.qdrant_edge import DEFAULT_PATH as EDGE_PATH

            return Path(self.path or EDGE_PATH) / self.collection
        return None

    def open(self) -> VectorStore:
        from poolrag.stores import open_store

        return open_store(
            self.kind,
            self.collection,
            uri=self.uri,
            path=self.path,
            url=self.url,
            api_key=self.api_key,
            retry=self.retry,
        )
