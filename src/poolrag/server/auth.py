"""Bearer API-key check, as OpenAI clients send it (``Authorization: Bearer <key>``)."""

from __future__ import annotations

import hmac

from starlette.types import ASGIApp, Receive, Scope, Send

from poolrag.server.errors import APIError, error_response

#: Reachable without the key: liveness probes and the API description carry no data.
PUBLIC_PATHS = frozenset({"/health", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})


class APIKeyMiddleware:
    """Rejects requests without the key before their body is read (constant-time comparison)."""

    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app = app
        self.expected = api_key.encode("utf-8")

    def _authorised(self, scope: Scope) -> bool:
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, token = value.partition(b" ")
                if scheme.lower() == b"bearer":
                    return hmac.compare_digest(token.strip(), self.expected)
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in PUBLIC_PATHS or self._authorised(scope):
            await self.app(scope, receive, send)
            return
        error = APIError(
            401,
            "missing or incorrect API key; send it as 'Authorization: Bearer <key>'",
            code="invalid_api_key",
            headers={"WWW-Authenticate": "Bearer"},
        )
        await error_response(error)(scope, receive, send)
