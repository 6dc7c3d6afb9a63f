"""Run the app under uvicorn with the server's connection limits.

``poolrag serve`` and the tests start uvicorn through :func:`uvicorn_config`, so both get the same
deadlines: headers (:mod:`poolrag.server.protocol`), idle keep-alive connections, and the
graceful-shutdown wait. Body deadlines and sizes are the app's own (its middleware).
"""

from __future__ import annotations

import logging
import socket
from typing import TYPE_CHECKING, Any

import uvicorn
from fastapi import FastAPI

from poolrag.server.protocol import with_header_limits
from poolrag.server.settings import HttpOptions, ServerSettings

if TYPE_CHECKING:
    from poolrag.backend import InProcessEngine

#: Most bytes of a request line and its headers.
MAX_HEADER_BYTES = 64 * 1024


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
            if self.root_path and path.startswith(self.root_path):
                return path not in self.paths and path[len(self.root_path) :] not in self.paths
            return path not in self.paths
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
        timeout_graceful_shutdown=max(1, round(settings.body_timeout_s)),
        **http.uvicorn_kwargs(),
        **kwargs,
    )
    if http.quiet_paths:  # after the Config, which sets up uvicorn's loggers
        logging.getLogger("uvicorn.access").addFilter(_QuietPaths(http.quiet_paths, http.root_path))
    return config


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
        raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def serve(
    app_or_engine: FastAPI | InProcessEngine,
    settings: ServerSettings,
    host: str,
    port: int,
    http: HttpOptions | None = None,
) -> None:
    """Serve ``app_or_engine`` (an app from :func:`create_app`, or an engine to build one for) until
    interrupted, as ``http`` says (log, TLS, root path)."""
    if isinstance(app_or_engine, FastAPI):
        app = app_or_engine
    else:
        from poolrag.server.app import create_app

        app = create_app(app_or_engine, settings)
    uvicorn.Server(uvicorn_config(app, settings, http, host=host, port=port, lifespan="on")).run()
