"""Name the served model's weights and output settings on every response.

A client keeps the facts it read from ``GET /v1/models``, and caches key stored vectors on them.
If the server restarts on the same URL with other weights under the same name, those facts go
stale silently; with the identity on each answer, the client sees the change on the first
response and refuses the vectors instead of filing them under the old model's keys.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from poolrag.client.wire import identity_headers
from poolrag.model_facts import ModelFacts
from poolrag.server.state import SCOPE_MODEL_KEY


def _encoded(facts: ModelFacts) -> list[tuple[bytes, bytes]]:
    return [(k.lower().encode(), v.encode()) for k, v in identity_headers(facts).items()]


class ModelIdentityMiddleware:
    """Adds the served facts' identity headers (:func:`poolrag.client.wire.identity_headers`, which
    the client reads back) to every HTTP response: those of the model the request was routed to
    (which the route names in the request's scope). An answer no model gave (a 404 for an unknown
    model, a refused body) names the one model when only one is served, and none among several, where
    naming the first would tell a client the wrong weights."""

    def __init__(self, app: ASGIApp, facts: Sequence[ModelFacts]) -> None:
        self.app = app
        self.by_name = {one.model_name: _encoded(one) for one in facts}
        self.default = _encoded(facts[0]) if len(facts) == 1 else []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_identity(message: Message) -> None:
            if message["type"] == "http.response.start":
                routed = scope.get(SCOPE_MODEL_KEY)
                headers = self.by_name.get(routed.name, self.default) if routed is not None else self.default
                message = {**message, "headers": [*message.get("headers", ()), *headers]}
            await send(message)

        await self.app(scope, receive, send_with_identity)
