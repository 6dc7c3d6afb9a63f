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
        from poolrag.stores.registry import StoreLocation, store_entry

        location = StoreLocation(uri=self.uri, path=self.path, url=self.url)
        return store_entry(self.kind).store_class().local_data(self.collection, location)

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
