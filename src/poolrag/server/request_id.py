"""``X-Request-Id`` on every answer, as vLLM's ``--enable-request-id-headers`` adds it: the id the
client (or a proxy in front) sent, else a fresh one, so a log line and an answer can be matched."""

from __future__ import annotations

import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = b"x-request-id"


class RequestIdMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = [value for name, value in scope.get("headers", ()) if name == HEADER]
        request_id = sent[0] if len(sent) == 1 and sent[0] else uuid.uuid4().hex.encode("ascii")

        async def with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", ()) if k.lower() != HEADER]
                message = {**message, "headers": [*headers, (HEADER, request_id)]}
            await send(message)

        await self.app(scope, receive, with_id)
