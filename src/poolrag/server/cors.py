"""CORS for a server that lists the web origins allowed to call it (vLLM's ``--allowed-origins``).

vLLM allows every origin by default; poolrag sends no CORS headers unless origins are listed. A
keyless server on loopback relies on the browser's same-origin rule to keep the pages a user opens
from reading its answers (and on the ``Host`` check against DNS rebinding,
:mod:`poolrag.server.host_check`): ``*`` by default would hand that away.

The middleware sits inside the ``Host`` check, which still refuses a rebound name, and outside the
API key: browsers send a preflight without credentials (vLLM's key check lets ``OPTIONS`` through
for the same reason).
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware as StarletteCORSMiddleware
from starlette.responses import Response

from poolrag.server.errors import APIError, error_response
from poolrag.server.settings import ServerSettings

_ANY = ("*",)


class CORSMiddleware(StarletteCORSMiddleware):
    """Starlette's, with a refused preflight answered in OpenAI's error shape like every error."""

    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code == 200:
            return response
        refused = bytes(response.body).decode().removeprefix("Disallowed CORS ")  # "origin, method"
        cors_headers = {
            name: value
            for name, value in response.headers.items()
            if name.startswith("access-control-") or name == "vary"
        }
        error = APIError(
            400,
            f"CORS preflight refused: this server does not allow its {refused} "
            "(see 'poolrag serve --allowed-origins')",
            code="cors_refused",
            headers=cors_headers,
        )
        return error_response(error)


def add_cors(app: FastAPI, settings: ServerSettings) -> None:
    """The CORS middleware, when ``settings`` list allowed origins (added where the app's
    middleware order puts it: see :func:`poolrag.server.app.create_models_app`)."""
    if settings.allowed_origins is None:
        return
    app.add_middleware(
        CORSMiddleware,
        allow_origins=settings.allowed_origins,
        allow_methods=_ANY if settings.allowed_methods is None else settings.allowed_methods,
        allow_headers=_ANY if settings.allowed_headers is None else settings.allowed_headers,
        allow_credentials=settings.allow_credentials,
    )
