"""Refuse oversized request bodies with 413 before they are parsed.

``Content-Length`` is checked first; chunked bodies (no length) are counted as they stream in, so
neither kind can make the server buffer more than the limit.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from poolrag.server.errors import APIError, error_response


class BodySizeLimitMiddleware:
    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    def _too_large(self) -> APIError:
        return APIError(
            413,
            f"request body is larger than the server's limit of {self.max_body_bytes} bytes",
            code="request_too_large",
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = next((v for k, v in scope.get("headers", ()) if k == b"content-length"), None)
        if length is not None:
            if not length.isdigit():
                await error_response(APIError(400, "invalid Content-Length header"))(scope, receive, send)
                return
            if int(length) > self.max_body_bytes:
                await error_response(self._too_large())(scope, receive, send)
                return

        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left; nobody to answer
            body += message.get("body", b"")
            if len(body) > self.max_body_bytes:
                await error_response(self._too_large())(scope, receive, send)
                return
            if not message.get("more_body", False):
                break

        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
