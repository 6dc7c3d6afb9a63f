"""Bearer API-key check, as OpenAI clients send it (``Authorization: Bearer <key>``).

A request with more than one ``Authorization`` header is refused (400) before any key is compared:
which one counts would otherwise depend on their order, and a proxy in front may judge the other.
"""

from __future__ import annotations

import hmac

from starlette.types import ASGIApp, Receive, Scope, Send

from poolrag.server.errors import APIError, error_response
from poolrag.server.scope_path import route_path

#: Reachable without the key: liveness probes, the version and the API description carry no data.
PUBLIC_PATHS = frozenset(
    {"/health", "/ping", "/version", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}
)
#: ``GET /`` is TEI's probe, open there with ``--api-key`` set (a probe written for TEI gets no 401
#: and restarts no pod here); ``POST /`` is a model's route and needs the key.
PUBLIC_READS = frozenset({"/"})


class APIKeyMiddleware:
    """Rejects requests without the key before their body is read (constant-time comparison)."""

    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app = app
        self.expected = api_key.encode("utf-8")

    def _authorised(self, values: list[bytes]) -> bool:
        if len(values) != 1:
            return False
        scheme, _, token = values[0].partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self.expected)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        values = [value for name, value in scope.get("headers", ()) if name == b"authorization"]
        if len(values) > 1:
            error = APIError(
                400,
                f"the request has {len(values)} Authorization headers; send exactly one",
                param="Authorization",
                code="duplicate_authorization",
            )
            await error_response(error)(scope, receive, send)
            return
        path = route_path(scope)
        public = path in PUBLIC_PATHS or (path in PUBLIC_READS and scope.get("method") in ("GET", "HEAD"))
        if public or self._authorised(values):
            await self.app(scope, receive, send)
            return
        error = APIError(
            401,
            "missing or incorrect API key; send it as 'Authorization: Bearer <key>'",
            headers={"WWW-Authenticate": "Bearer"},
        )
        await error_response(error)(scope, receive, send)
