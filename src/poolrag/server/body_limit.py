"""Read request bodies within a size limit, a time limit and the in-flight byte budget.

``Content-Length`` is checked first; chunked bodies (no length) are counted as they stream in, so
neither kind can make the server buffer more than the limit. The body must arrive within
``body_timeout_s`` (408 otherwise, and the connection is closed), so slow senders cannot hold
connections and buffers open. The bytes that arrived are reserved in the admission budget until
the request is answered (503 + ``Retry-After`` when the budget is spent).
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from poolrag.server.admission import Admission, Reservation
from poolrag.server.errors import APIError, error_response


class _ClientGone(Exception):
    pass


class BodySizeLimitMiddleware:
    def __init__(
        self, app: ASGIApp, max_body_bytes: int, admission: Admission, body_timeout_s: float
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.admission = admission
        self.body_timeout_s = body_timeout_s

    def _too_large(self) -> APIError:
        return APIError(
            413,
            f"request body is larger than the server's limit of {self.max_body_bytes} bytes "
            "(--max-body-bytes): split the inputs over several requests",
        )

    async def _read(self, receive: Receive, reservation: Reservation) -> bytes:
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _ClientGone
            body += message.get("body", b"")
            if len(body) > self.max_body_bytes:
                raise self._too_large()
            reservation.grow_to(len(body))
            if not message.get("more_body", False):
                return bytes(body)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = next((v for k, v in scope.get("headers", ()) if k == b"content-length"), None)
        with self.admission.body_bytes() as reservation:
            try:
                if length is not None:
                    if not length.isdigit():
                        raise APIError(400, "invalid Content-Length header", code="invalid_content_length")
                    if int(length) > self.max_body_bytes:
                        raise self._too_large()
                    # bytes are reserved as they arrive (in _read), not as declared: headers alone
                    # claiming 16 MB must not fill the budget for everyone else
                async with asyncio.timeout(self.body_timeout_s):
                    body = await self._read(receive, reservation)
            except _ClientGone:
                return  # nobody to answer
            except TimeoutError:
                error = APIError(
                    408,
                    f"the request body did not arrive within {self.body_timeout_s:g}s",
                    headers={"Connection": "close"},
                )
                await error_response(error)(scope, receive, send)
                return
            except APIError as error:
                await error_response(error)(scope, receive, send)
                return

            replayed = False

            async def replay() -> Message:
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            await self.app(scope, replay, send)
