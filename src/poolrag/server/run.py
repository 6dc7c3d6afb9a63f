"""Run the app under uvicorn with the server's connection limits.

``poolrag serve`` and the tests start uvicorn through :func:`uvicorn_config`, so both get the same
deadlines: headers (:mod:`poolrag.server.protocol`), idle keep-alive connections, and the
graceful-shutdown wait. Body deadlines and sizes are the app's own (its middleware).
:class:`DrainingServer` ends that wait the way clients understand.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn
from fastapi import FastAPI

from poolrag.server.protocol import with_header_limits
from poolrag.server.scope_path import route_path
from poolrag.server.settings import HttpOptions, ServerSettings
from poolrag.server.unix_socket import UnixListener

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from poolrag.backend import InProcessEngine

#: Most bytes of a request line and its headers.
MAX_HEADER_BYTES = 64 * 1024
#: Seconds past the drain window for the requests the closed engines fail to be answered (503)
#: before uvicorn cancels what is left (a request still tokenising, say).
ANSWER_GRACE_S = 10.0


class _QuietPaths(logging.Filter):
    """Drops uvicorn's access line of a request to one of ``paths`` (its args: client, method,
    path with query, HTTP version, status), read with or without the root path uvicorn prefixes."""

    def __init__(self, paths: frozenset[str], root_path: str) -> None:
        super().__init__()
        self.paths, self.root_path = paths, root_path

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            path = args[2].partition("?")[0]
            routed = route_path({"path": path, "root_path": self.root_path})
            return path not in self.paths and routed not in self.paths
        return True


def uvicorn_config(
    app: FastAPI, settings: ServerSettings, http: HttpOptions | None = None, **kwargs: Any
) -> uvicorn.Config:
    http = http or HttpOptions()
    config = uvicorn.Config(
        app,
        http=with_header_limits(settings.header_timeout_s, MAX_HEADER_BYTES),
        timeout_keep_alive=max(1, round(settings.keep_alive_s)),
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        # the drain window is DrainingServer's; uvicorn cancels only what its answers outlast
        timeout_graceful_shutdown=max(1, round(settings.drain_timeout_s + ANSWER_GRACE_S)),
        **http.uvicorn_kwargs(),
        **kwargs,
    )
    # after the Config, which sets up uvicorn's loggers but keeps their filters: an earlier server's
    # in this process would stay and quiet its paths here too
    access = logging.getLogger("uvicorn.access")
    for earlier in [found for found in access.filters if isinstance(found, _QuietPaths)]:
        access.removeFilter(earlier)
    if http.quiet_paths:
        access.addFilter(_QuietPaths(http.quiet_paths, http.root_path))
    return config


class DrainingServer(uvicorn.Server):
    """uvicorn's server, whose stop answers the requests it cuts short.

    On SIGTERM or Ctrl-C uvicorn lets requests in flight run for the graceful-shutdown window,
    then cancels them: each got a bare text/plain 500 and a traceback in the log. Here the app's
    engines are closed when the drain window ends (at once on a second signal), so every request
    still waiting on one fails with :class:`~poolrag.errors.EngineClosedError` once the batch
    running finishes, which the app answers as JSON 503 "shutting down" (TEI's routes:
    ``Unhealthy``); uvicorn's own deadline is :data:`ANSWER_GRACE_S` later, for what is left."""

    def __init__(self, config: uvicorn.Config, drain_s: float) -> None:
        super().__init__(config)
        self._drain_s = drain_s
        self._closed = False

    def handle_exit(self, sig: int, frame: Any) -> None:
        """A second SIGTERM cuts the drain short as a second Ctrl-C does (uvicorn: SIGINT only), so
        an orchestrator's or an operator's second ``kill`` is heard."""
        if self.should_exit and sig == signal.SIGTERM:
            self.force_exit = True
        super().handle_exit(sig, frame)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        closer = asyncio.create_task(self._close_engines_when_due())
        try:
            await super().shutdown(sockets)
        finally:
            closer.cancel()
        if self.server_state.tasks:  # a second signal cut the wait short: answer what is left
            await self._close_engines()
            left = list(self.server_state.tasks)  # read again: closing them may have answered all
            if left:  # asyncio.wait refuses an empty set (ValueError, a traceback at the exit)
                await asyncio.wait(left, timeout=ANSWER_GRACE_S)
        if self.force_exit:
            # uvicorn skips the app's shutdown on a second signal, so the loop's end cancelled the
            # lifespan task, which uvicorn logged as an ERROR with two tracebacks; the app's shutdown
            # waits on nothing (it stops the idle trimmer and lets go of the thread pools), so it runs
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.lifespan.shutdown(), ANSWER_GRACE_S)

    async def _close_engines_when_due(self) -> None:
        deadline = time.monotonic() + self._drain_s
        while time.monotonic() < deadline and not self.force_exit and self.server_state.tasks:
            await asyncio.sleep(0.1)
        if self.server_state.tasks:
            await self._close_engines()

    async def _close_engines(self) -> None:
        if self._closed:
            return
        self._closed = True
        served = getattr(getattr(self.config.app, "state", None), "poolrag", None)
        engines = [model.engine for model in served.models] if served is not None else []
        running = len(self.server_state.tasks)
        logger.warning("stopping: the %d request(s) still running are answered 503 (shutting down)", running)
        # on a thread of its own, started now: awaiting it may be cancelled (a second signal), the
        # close is not, and it never queues behind the loop's other work
        closing: concurrent.futures.Future[None] = concurrent.futures.Future()

        def close_all() -> None:
            # running from here on, so a cancelled wait (a second signal) leaves it to finish rather
            # than having it set a cancelled future's result (InvalidStateError in the log)
            awaited = closing.set_running_or_notify_cancel()
            try:
                for engine in engines:
                    engine.close()
            except BaseException as exc:  # reported where it is awaited
                if awaited:
                    closing.set_exception(exc)
            else:
                if awaited:
                    closing.set_result(None)

        threading.Thread(target=close_all, name="poolrag-close-engines", daemon=True).start()
        await asyncio.wrap_future(closing)


def check_port_free(host: str, port: int) -> None:
    """Bind ``host:port`` as uvicorn will and let go at once, so a busy port is found before the
    model loads (minutes for a large one); raises ``OSError`` naming the address."""
    listening_socket(host, port, reuse_port=False).close()


def listening_socket(host: str, port: int, *, reuse_port: bool = True) -> socket.socket:
    """A listening socket on ``host:port`` (with ``SO_REUSEPORT``, beside a sibling worker's);
    ``OSError`` naming the address when another program holds the port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        address = f"[{host}]" if ":" in host else host
        raise OSError(exc.errno, f"cannot listen on {address}:{port}: {exc.strerror or exc}") from None
    return sock


def serve(
    app_or_engine: FastAPI | InProcessEngine,
    settings: ServerSettings,
    host: str,
    port: int,
    http: HttpOptions | None = None,
    uds: Path | None = None,
) -> None:
    """Serve ``app_or_engine`` (an app from :func:`create_app`, or an engine to build one for) until
    interrupted, on ``host:port`` or the Unix socket ``uds``, as ``http`` says (log, TLS, root path)."""
    if isinstance(app_or_engine, FastAPI):
        app = app_or_engine
    else:
        from poolrag.server.app import create_app
        from poolrag.server.host_check import for_listen_host

        app = create_app(app_or_engine, for_listen_host(settings, host))
    config = uvicorn_config(app, settings, http, host=host, port=port, lifespan="on")
    if uds is None:
        DrainingServer(config, settings.drain_timeout_s).run(sockets=_ipv6_sockets(host, port, http))
        return
    listener = _unix_listener(uds)
    with listener.closed_on_sigterm():
        try:
            DrainingServer(config, settings.drain_timeout_s).run(sockets=[listener.sock])
        finally:
            listener.close()


def _unix_listener(path: Path) -> UnixListener:
    """The Unix socket to serve on; one that cannot be made since the command checked it ends the
    process as uvicorn's own failed bind does. uvicorn names no socket it did not bind: said here.
    Its connections carry no address, so the loopback ``Host`` rule does not apply to them (a
    browser cannot reach a socket file): a proxy's ``Host`` is answered as it sent it."""
    try:
        listener = UnixListener(path)
    except OSError as exc:
        logger.error("%s", exc.strerror)
        sys.exit(3)  # uvicorn's STARTUP_FAILURE
    logger.info("listening on unix:%s", path)
    return listener


def _ipv6_sockets(host: str, port: int, http: HttpOptions | None) -> list[socket.socket] | None:
    """An IPv6 address's listening socket, ours as vLLM's and ``--workers``' are: asyncio's bind
    of ``::`` sets ``IPV6_V6ONLY``, so IPv4 clients and a Kubernetes probe of the pod's IPv4
    address were refused. uvicorn names the address only of sockets it binds, so this says it;
    a port taken since the command checked it ends the process as uvicorn's own bind does."""
    if ":" not in host:
        return None
    try:
        sock = listening_socket(host, port, reuse_port=False)
    except OSError as exc:
        logger.error("%s", exc.strerror)
        sys.exit(3)  # uvicorn's STARTUP_FAILURE
    scheme = "https" if http is not None and http.tls else "http"
    also = " (IPv6 and IPv4)" if host == "::" else ""
    logger.info("listening on %s://[%s]:%d%s", scheme, host, sock.getsockname()[1], also)
    return [sock]
