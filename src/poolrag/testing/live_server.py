"""``poolrag serve``'s app on 127.0.0.1 for tests that call it with real HTTP clients.

uvicorn runs in a daemon thread on a socket bound (to a free port) before it starts, so there is no
port race, and the test shares the server's engine to compare remote results with in-process ones.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import uvicorn

from poolrag import Engine
from poolrag.server import ServerSettings, create_app
from poolrag.server.run import uvicorn_config
from poolrag.server.settings import HttpOptions


class LiveServer:
    """``poolrag serve``'s app under uvicorn in a thread, on a socket bound before it starts."""

    def __init__(self, app: Any, port: int = 0, tls: Mapping[str, Any] | None = None) -> None:
        """``port``: 0 for a free one; a given port (an earlier server's) serves a restart there.
        ``tls``: uvicorn's ``ssl_*`` settings (``ssl_certfile``, ``ssl_keyfile``), to serve https."""
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind(("127.0.0.1", port))
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self.socket.getsockname()[1]}"
        settings = app.state.poolrag.settings  # the same connection deadlines as 'poolrag serve'
        http = HttpOptions(log_level="warning", tls=dict(tls or {}))
        self.server = uvicorn.Server(uvicorn_config(app, settings, http, lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the poolrag server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.socket.close()


def serve(engine: Engine, name: str, **settings: Any) -> Iterator[str]:
    with LiveServer(create_app(engine, ServerSettings(served_model_names=(name,), **settings))) as live:
        yield live.url
