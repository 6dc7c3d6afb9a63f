"""uvicorn's HTTP protocols with a deadline and a size cap for request headers.

uvicorn times out idle keep-alive connections, but a connection that sends its headers a byte at
a time is held for as long as the client likes; a few hundred of them exhaust the server's file
descriptors. Here every request's headers (from the first byte, or from the connection's start)
must be complete within ``header_timeout_s``, else the connection is closed. The body has a
deadline of its own (:mod:`poolrag.server.body_limit`).

The parser is httptools (C, llhttp) where the ``server`` extra installed it, as uvicorn's own
``auto`` would choose, and h11 (pure Python) otherwise: under many small requests the parser is a
good part of the event loop's time per request (``benchmarks/RESULTS.md``, serve_vs_servers.py).
h11 caps a request's headers at ``max_header_bytes`` itself; httptools has no cap, so it is
counted here and an over-long head is answered 400 as h11's is.

httptools also reads any ``Upgrade`` offer as a protocol switch and skips the body: a request
offering cleartext HTTP/2 (``Upgrade: h2c``, which Java's ``HttpClient`` sends by default) reached
the app with no body. A server may ignore the offer (RFC 9110 section 7.8), as h11 does, so an
``Upgrade`` other than websocket's is dropped from the head before httptools reads it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
from typing import Any, Literal

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

logger = logging.getLogger(__name__)


class HeaderDeadline:
    """The deadline, for a protocol that says when it is waiting for a request's headers (a mixin
    before uvicorn's protocol class: the timer starts with the connection and ends with it)."""

    header_timeout_s: float = 10.0
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    _header_timer: asyncio.TimerHandle | None = None

    def _awaiting_headers(self) -> bool:
        raise NotImplementedError

    def _arm(self) -> None:
        if self._header_timer is None and self._awaiting_headers():
            self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self._awaiting_headers() and not self.transport.is_closing():
            logger.info("closing a connection that sent no complete headers in %gs", self.header_timeout_s)
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)  # type: ignore[misc]


class HeaderTimeoutH11Protocol(HeaderDeadline, H11Protocol):
    def _awaiting_headers(self) -> bool:
        return self.conn.their_state is h11.IDLE

    def data_received(self, data: bytes) -> None:
        self._arm()  # the first byte of a request ends the keep-alive wait and starts this one
        super().data_received(data)
        if not self._awaiting_headers():
            self._disarm()


def _is_unserved_upgrade(line: bytes) -> bool:
    name, colon, value = line.partition(b":")
    return bool(colon) and name.strip().lower() == b"upgrade" and value.strip().lower() != b"websocket"


def without_unserved_upgrade(data: bytes, head_end: int) -> bytes:
    """``data``, a request's head (ending at ``head_end``) and what follows, with an ``Upgrade``
    header other than websocket's left out: the request is then read as plain HTTP/1.1."""
    lines = data[:head_end].split(b"\r\n")
    kept = [line for line in lines if not _is_unserved_upgrade(line)]
    return data if len(kept) == len(lines) else b"\r\n".join(kept) + data[head_end:]


def _httptools_protocol() -> type | None:
    """The httptools protocol class with the deadline and the cap, or ``None`` without httptools."""
    if importlib.util.find_spec("httptools") is None:
        return None
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class HeaderTimeoutHttpToolsProtocol(HeaderDeadline, HttpToolsProtocol):
        max_header_bytes: int = 64 * 1024

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._in_head, self._head_bytes = True, 0  # a new connection waits for a request's head
            self._head = bytearray()  # a head held until it is whole (see without_unserved_upgrade)

        def _awaiting_headers(self) -> bool:
            # an answer still being computed is not a wait for headers, whatever came meanwhile
            return self._in_head and (self.cycle is None or self.cycle.response_complete)

        def data_received(self, data: bytes) -> None:
            if self._in_head:
                self._head_bytes += len(data)
                searched_from = max(0, len(self._head) - 3)
                self._head += data  # in place: a head sent a byte at a time is not copied each time
                head_end = self._head.find(b"\r\n\r\n", searched_from)
                if head_end < 0 and self._head_bytes <= self.max_header_bytes:  # more of it to come
                    self._unset_keepalive_if_required()
                    self._arm()
                    return
                whole = bytes(self._head)
                data = whole if head_end < 0 else without_unserved_upgrade(whole, head_end)
                self._head.clear()
            super().data_received(data)
            if self._in_head and self._head_bytes > self.max_header_bytes and not self.transport.is_closing():
                logger.info("closing a connection whose request head passed %d bytes", self.max_header_bytes)
                self.send_400_response("Invalid HTTP request received.")
            elif self._in_head:
                # bytes between requests (a bare CRLF, which the parser skips without starting a
                # message) end uvicorn's keep-alive wait: this deadline holds the connection instead
                self._arm()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._in_head = True
            self._arm()  # the first byte of a request ends the keep-alive wait and starts this one

        def on_headers_complete(self) -> None:
            self._in_head, self._head_bytes = False, 0
            self._disarm()
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._in_head, self._head_bytes = True, 0  # what comes next is the next request's head

    return HeaderTimeoutHttpToolsProtocol


def with_header_limits(
    header_timeout_s: float, max_header_bytes: int, parser: Literal["auto", "h11"] = "auto"
) -> type:
    """The protocol class for uvicorn's ``http=`` option, with this server's header deadline and
    size cap (``auto``: httptools if installed, else h11; uvicorn's ``h11_max_incomplete_event_size``
    must say ``max_header_bytes`` too for h11)."""
    base = (_httptools_protocol() if parser == "auto" else None) or HeaderTimeoutH11Protocol
    limits = {"header_timeout_s": header_timeout_s, "max_header_bytes": max_header_bytes}
    return type(base.__name__, (base,), limits)
