"""A TCP proxy on 127.0.0.1 that misbehaves on purpose, between a client and a live server.

Tests of the HTTP client's failure handling need the faults a network and a dying server make (a
connection closed after the request arrived, headers a proxy drops) on real sockets, in front of a
real ``poolrag serve``. The proxy runs an asyncio loop in a daemon thread; each accepted
connection is handled by the fault set when it arrives.
"""

from __future__ import annotations

import asyncio
import re
import socket
import threading
from typing import Literal

Fault = Literal["pass", "drop"]
_IDENTITY_HEADER = re.compile(rb"(?i)x-poolrag-")


class FaultProxy:
    """Forwards ``url`` to ``upstream_port``, with ``fault`` on the next ``faults_left`` connections:

    - ``"drop"``: read the request, then close the connection without an answer, as a server killed
      mid-request does (nothing reaches the upstream).

    ``hide_identity``: rename the server's ``X-Poolrag-*`` answer headers (same length, so the
    answer stays whole), as a proxy that passes only the headers it knows drops them.
    ``connections`` counts the connections accepted.
    """

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.fault: Fault = "pass"
        self.faults_left = 0
        self.hide_identity = False
        self.connections = 0
        self._writers: set[asyncio.StreamWriter] = set()  # open connections, both sides, closed by close()
        self._loop = asyncio.new_event_loop()
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        # the loop runs until the process ends: stopping it would leave transports to be collected
        # after it closed
        threading.Thread(target=self._loop.run_forever, daemon=True).start()
        self._server = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)

    def set_fault(self, fault: Fault, count: int = 1) -> None:
        self.fault, self.faults_left = fault, count

    async def _start(self) -> asyncio.Server:
        return await asyncio.start_server(self._handle, sock=self._socket)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        fault: Fault = "pass"
        if self.faults_left > 0:
            self.faults_left -= 1
            fault = self.fault
        try:
            if fault == "drop":
                await reader.readuntil(b"\r\n\r\n")
                writer.close()
                return
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
            self._writers.add(up_writer)
        except (OSError, asyncio.IncompleteReadError):
            writer.close()
            return
        try:
            await asyncio.gather(
                self._pipe(reader, up_writer, answer=False), self._pipe(up_reader, writer, answer=True)
            )
        finally:
            writer.close()
            up_writer.close()

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, answer: bool) -> None:
        try:
            while data := await src.read(65536):
                if answer and self.hide_identity:
                    data = _IDENTITY_HEADER.sub(b"x-removed-", data)
                dst.write(data)
                await dst.drain()
        except OSError:
            pass
        finally:
            dst.close()

    def close(self) -> None:
        """Stop accepting, and close the connections still open."""

        def stop() -> None:
            self._server.close()
            for writer in self._writers:
                writer.close()

        self._loop.call_soon_threadsafe(stop)

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
