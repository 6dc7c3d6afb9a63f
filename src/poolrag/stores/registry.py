"""The one list of store kinds: what ``open_store``, the CLI's ``--store`` choices and the extras check read.

Each entry names the module and class of a store *as constants in code*, and the extra that installs
its client. A kind read from a flag, a file or a record only selects among these entries; nothing
read from data picks what to import. Adding a store is one file (a :class:`StoreTemplate` subclass
with an ``open`` classmethod) and one line in :data:`STORES`.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from poolrag.errors import InvalidInputError
from poolrag.stores.names import check_collection_name
from poolrag.stores.retry import RetryPolicy

if TYPE_CHECKING:
    from poolrag.stores.base import VectorStore


@dataclass(frozen=True)
class StoreEntry:
    """Where one store kind's class lives and which extra installs its client.

    Attributes:
        module: the module holding the class, imported only when the kind is opened.
        class_name: the store class in ``module`` (a :class:`~poolrag.stores.template.StoreTemplate`).
        extra: the ``poolrag[...]`` extra that installs the client; ``None`` when nothing extra is needed.
        client_modules: the top-level modules that extra installs (looked up, not imported, before a
            command starts, so a missing one is a single line).
        opens_with: those of them every use of the store needs (default: all); the others are
            checked by the store where it needs them (Milvus Lite only for a local file).
    """

    module: str
    class_name: str
    extra: str | None = None
    client_modules: tuple[str, ...] = ()
    opens_with: tuple[str, ...] | None = None

    @property
    def pip_hint(self) -> str:
        """What to run when the extra is missing."""
        return f'pip install "poolrag[{self.extra}]"' if self.extra else ""

    def store_class(self) -> type:
        """The class, once its client is known to be installed: a missing extra is one line naming
        it, not an import error from deep inside the store module."""
        needed = self.client_modules if self.opens_with is None else self.opens_with
        missing = [name for name in needed if not module_installed(name)]
        if missing:
            raise ModuleNotFoundError(
                f"this store needs the {self.extra} extra: {self.pip_hint} (missing: {', '.join(missing)})",
                name=missing[0],
            )
        return getattr(importlib.import_module(self.module), self.class_name)


def module_installed(name: str) -> bool:
    """Whether a top-level module can be imported (looked up, not imported)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a broken or half-installed package
        return False


#: kind -> entry; the order is the order of the CLI's choices (the first is its default).
STORES: dict[str, StoreEntry] = {
    "milvus": StoreEntry(
        "poolrag.stores.milvus",
        "MilvusStore",
        "milvus",
        ("pymilvus", "milvus_lite"),
        opens_with=("pymilvus",),
    ),
    "qdrant": StoreEntry("poolrag.stores.qdrant", "QdrantStore", "qdrant", ("qdrant_client",)),
    "qdrant-edge": StoreEntry(
        "poolrag.stores.qdrant_edge", "QdrantEdgeStore", "qdrant-edge", ("qdrant_edge",)
    ),
}


def store_kinds() -> tuple[str, ...]:
    """The registered kinds, in registry order."""
    return tuple(STORES)


def store_entry(kind: str) -> StoreEntry:
    """The entry of ``kind``; an unknown kind is one line naming the registered ones."""
    entry = STORES.get(kind) if isinstance(kind, str) else None
    if entry is None:
        raise InvalidInputError(f"unknown store {kind!r}; choose one of {', '.join(STORES)}")
    return entry


@dataclass(frozen=True)
class StoreLocation:
    """Where a store kind finds its data (the location part of :class:`~poolrag.stores.address.StoreAddress`);
    each store takes the fields that mean something to it and
    refuses the others (:meth:`refuse_other_than`)."""

    uri: str | None = None
    path: str | None = None
    url: str | None = None
    api_key: str | None = None
    retry: RetryPolicy | None = None

    def __post_init__(self) -> None:
        # a local path keeps its "~" where no shell expanded it (``--path=~/q``, a config file):
        # taken as is, it made a folder named "~" in the working directory
        for field in ("uri", "path"):  # expanduser changes only a leading "~" (never a URL)
            if isinstance(value := getattr(self, field), str):
                object.__setattr__(self, field, os.path.expanduser(value))

    def refuse_other_than(self, taken: tuple[str, ...], message: str) -> None:
        """``message`` as an error when a location field outside ``taken`` was given."""
        if any(getattr(self, field) is not None for field in ("uri", "path", "url") if field not in taken):
            raise InvalidInputError(message)


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
    """Open one collection of a registered store. The client libraries are imported only when used.

    ``milvus``: ``uri`` is a Milvus Lite file (default ``./poolrag_milvus.db``) or a server URL.
    ``qdrant``: ``path`` for local mode (default ``./poolrag_qdrant``) or ``url`` for a server.
    ``qdrant-edge``: ``path`` of the folder holding shards (default ``./poolrag_edge``).
    """
    check_collection_name(collection)
    entry = store_entry(kind)
    address = StoreLocation(uri=uri, path=path, url=url, api_key=api_key, retry=retry)
    return entry.store_class().open(collection, address)
