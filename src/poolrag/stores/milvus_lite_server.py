"""Handing a Milvus Lite database back when poolrag's last store on it closes.

pymilvus opens a ``.db`` path by starting Milvus Lite inside the process, one server per path, and
Milvus Lite holds an exclusive lock on the database until that server stops. pymilvus stops it only
at process exit (``MilvusClient.close()`` leaves it running), so a notebook that ingested and closed
its store still locked ``poolrag search`` in a shell out of the file. A :class:`LiteServerLease`
stops the server when the last poolrag store on the path closes, but only a server poolrag started,
and only while no other pymilvus client in the process (a LlamaIndex or LangChain Milvus store on
the same file) holds a connection to it. Both checks read pymilvus and milvus-lite state that has no
public accessor; where that state is not where this module looks, the server keeps running, as
before.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from typing import Any

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_open_stores: dict[str, int] = {}
_started_here: set[str] = set()


def _servers() -> dict[str, tuple[Any, ...]] | None:
    """milvus-lite's running servers, by absolute path (``(server, db, port)``), if readable."""
    try:
        from milvus_lite.server_manager import server_manager_instance
    except ImportError:
        return None
    servers = getattr(server_manager_instance, "_servers", None)
    return servers if isinstance(servers, dict) else None


def _pymilvus_addresses() -> Iterator[str | None]:
    """The address of every connection a pymilvus client in this process still holds.

    ``None`` stands for a connection manager this module cannot read, so the caller keeps the server.
    """
    try:
        from pymilvus.client.connection_manager import AsyncConnectionManager, ConnectionManager
    except ImportError:
        yield None
        return
    managers = [ConnectionManager.get_instance(), *getattr(AsyncConnectionManager, "_instances", {}).values()]
    for manager in managers:
        registry, dedicated = getattr(manager, "_registry", None), getattr(manager, "_dedicated", None)
        if not isinstance(registry, dict) or not isinstance(dedicated, dict):
            yield None
            continue
        for managed in registry.values():  # a shared connection outlives its clients; count only held ones
            if managed.has_clients:
                yield managed.config.address
        for managed in dedicated.values():  # closed and dropped when its client closes
            yield managed.config.address
    try:
        from pymilvus.orm.connections import connections
    except ImportError:  # a pymilvus without the ORM (deprecated in 3.0) has no ORM connections
        return
    handlers = getattr(connections, "_alias_handlers", None)
    if not isinstance(handlers, dict):
        yield None
        return
    for handler in handlers.values():
        yield getattr(handler, "_address", None)


def _forget_cached_schemas(address: str) -> None:
    """Drop what pymilvus cached about the stopped server's collections: a later server, of another
    file, may be given the same port."""
    try:
        from pymilvus.client.cache import GlobalCache
    except ImportError:
        return
    for region in (getattr(GlobalCache, "schema", None), getattr(GlobalCache, "collection_ts", None)):
        entries, lock = getattr(region, "_cache", None), getattr(region, "_lock", None)
        if not isinstance(entries, dict) or lock is None:
            continue
        with lock:
            for key in [k for k in entries if isinstance(k, tuple) and k[:1] == (address,)]:
                entries.pop(key, None)


class LiteServerLease:
    """One poolrag store's hold on the Milvus Lite server of ``uri`` (a ``.db`` path).

    Take it just before the store's client connects (:meth:`acquire`: a store still connecting
    counts, so a close in another thread does not stop the server under it) and give it back with
    :meth:`release` once the client has closed or failed to connect."""

    def __init__(self, uri: str) -> None:
        self.path = os.path.abspath(uri)  # as milvus-lite keys its servers
        self._held = False

    def acquire(self) -> None:
        with _lock:
            if self._held:
                return
            servers = _servers()
            if servers is not None and self.path not in servers:
                _started_here.add(self.path)  # this store's connect starts it
            _open_stores[self.path] = _open_stores.get(self.path, 0) + 1
            self._held = True

    def release(self) -> None:
        """Stop the server if this was poolrag's last store on it and nothing else holds it."""
        with _lock:
            if not self._held:
                return
            self._held = False
            left = _open_stores.pop(self.path) - 1
            if left:
                _open_stores[self.path] = left
                return
            if self.path not in _started_here:
                return
            servers = _servers()
            entry = None if servers is None else servers.get(self.path)
            if entry is None:
                _started_here.discard(self.path)
                return
            address = f"127.0.0.1:{entry[-1]}"
            try:
                in_use = any(held in (None, address) for held in _pymilvus_addresses())
            except Exception:  # pymilvus changed shape: keep the server, as before this lease existed
                logger.debug("could not read pymilvus connections; Milvus Lite keeps running", exc_info=True)
                in_use = True
            if in_use:
                logger.debug("Milvus Lite %s stays up: another pymilvus client holds it", self.path)
                return
            _started_here.discard(self.path)
            from milvus_lite.server_manager import server_manager_instance

            server_manager_instance.release_server(self.path)
            _forget_cached_schemas(address)
            logger.debug("Milvus Lite %s stopped: poolrag's last store on it closed", self.path)
