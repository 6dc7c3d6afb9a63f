"""The route class of the paths that speak Text Embeddings Inference's API, alone or beside another
dialect: :class:`~poolrag.server.routing.OffLoopRoute`, whose failures answer a TEI request in
TEI's error shape (:mod:`poolrag.server.tei_errors`).

A route's body model says which dialect a request speaks: a TEI body class
(``speaks_tei = True``) always, a body of two dialects (``/rerank``, ``/tokenize``) by its fields,
read back from the request's JSON when the body failed to validate. Anything else keeps the
app's OpenAI-shaped errors.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from fastapi import Request, Response

from poolrag.server.errors import log_refusal
from poolrag.server.routing import OffLoopRoute
from poolrag.server.schemas import ErrorResponse
from poolrag.server.tei_errors import TEI_STATUS, tei_error_response
from poolrag.server.tei_schemas import TeiErrorResponse

_TEI_ERROR = {"model": TeiErrorResponse}
#: Answered before a route runs (the API key, the body's bytes and deadline) in OpenAI's shape, or
#: by the route in TEI's.
_EITHER = {"model": ErrorResponse | TeiErrorResponse}

#: Error answers of a TEI route, as TEI documents them, and 404 for an unknown ``model``.
TEI_ERRORS: dict[int | str, dict[str, Any]] = {
    TEI_STATUS["Empty"]: {
        **_TEI_ERROR,
        "description": "Empty batch, or a body that is not JSON (or not Unicode)",
    },
    401: {"model": ErrorResponse, "description": "Missing or wrong API key (when the server has one)"},
    404: {**_TEI_ERROR, "description": "The request's model is not served here"},
    413: {**_EITHER, "description": "Request over the server's per-request limits"},
    TEI_STATUS["Validation"]: {**_TEI_ERROR, "description": "Invalid request, or an input too long"},
    TEI_STATUS["Backend"]: {**_TEI_ERROR, "description": "The model does not run this route"},
    TEI_STATUS["Overloaded"]: {**_TEI_ERROR, "description": "Queue full: retry after Retry-After seconds"},
    TEI_STATUS["Unhealthy"]: {
        **_EITHER,
        "description": "Shutting down, or request bodies in flight over the budget",
    },
}


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


async def _speaks_tei(request: Request, body_model: Any) -> bool:
    if getattr(body_model, "speaks_tei", False) is True:  # a TEI body class
        return True
    read_dialect: Callable[[Any], bool] | None = getattr(body_model, "dialect_speaks_tei", None)
    if read_dialect is None:
        return False
    data = await anyio.to_thread.run_sync(_json, await request.body())  # the body's bytes, kept
    return read_dialect(data)


class TeiRoute(OffLoopRoute):
    def get_route_handler(self) -> Callable[[Request], Awaitable[Response]]:
        handle = super().get_route_handler()
        body_model = typing.get_type_hints(self.endpoint)["body"]

        async def handle_in_dialect(request: Request) -> Response:
            try:
                return await handle(request)
            except Exception as exc:
                if not await _speaks_tei(request, body_model):
                    raise
                answer = tei_error_response(exc)
                log_refusal(request, answer.status_code, "tei", str(getattr(exc, "message", exc)))
                return answer

        return handle_in_dialect


def with_tei_errors(errors: dict[int | str, dict[str, Any]]) -> dict[int | str, dict[str, Any]]:
    """The error answers of a path that speaks another dialect beside TEI's (``/rerank``,
    ``/tokenize``): each status either dialect answers, in either's shape where both have one."""
    merged = {**TEI_ERRORS, **errors}
    for status in errors.keys() & TEI_ERRORS.keys():
        if "model" in errors[status] and "model" in TEI_ERRORS[status]:
            merged[status] = {**errors[status], "model": errors[status]["model"] | TeiErrorResponse}
    return merged
