"""Errors in Text Embeddings Inference's shape: ``{"error": "...", "error_type": "Validation"}``.

TEI's clients read its status codes and ``error_type``, as its router's ``impl From<&ErrorType>
for StatusCode`` (router/src/http/server.rs) sets them: Validation (too many inputs, an input too
long with ``truncate: false``, a bad ``dimensions`` or ``prompt_name``) and Tokenizer are 422,
Empty (no inputs) 400, Overloaded 429, a model that cannot run the route (Backend) 424, Unhealthy
503. That is TEI 1.9.0 and later; TEI up to 1.8.3 answered Validation with 413, which its OpenAPI
still calls "Batch size error". A body TEI's JSON extractor refuses keeps axum's status: 400 for
text that is not JSON, a lone surrogate (``"\\ud800"``) included, as serde_json reads it as a
syntax error; 422 for JSON of the wrong shape; 415 for a body not declared as JSON.

The server's own errors (:class:`~poolrag.server.errors.APIError`, the engine's
:class:`~poolrag.errors.PoolragError`) are mapped here once, so the TEI routes fail as TEI does
and keep this server's messages. Answers made before a route runs (401 for a missing key, 413 for
a body over the byte limit) keep OpenAI's shape, as on every route.
"""

from __future__ import annotations

import logging

from fastapi.responses import JSONResponse

from poolrag.errors import InputTooLongError, InvalidTextError, PoolragError
from poolrag.server.errors import APIError, from_poolrag_error
from poolrag.server.tei_schemas import ErrorType, TeiErrorResponse

logger = logging.getLogger(__name__)

#: TEI's status code of each error type (its router's ``From<&ErrorType> for StatusCode``).
TEI_STATUS: dict[ErrorType, int] = {
    "Unhealthy": 503,
    "Backend": 424,
    "Overloaded": 429,
    "Validation": 422,
    "Tokenizer": 422,
    "Empty": 400,
}


def _from_api_error(error: APIError) -> tuple[int, ErrorType]:
    """The TEI status and type of one of this server's errors."""
    if error.code == "empty_input":
        return 400, "Empty"
    if error.code == "unsupported_task":  # TEI: "model is not a re-ranker model", 424
        return 424, "Backend"
    if error.code == "invalid_json":  # TEI (axum) answers unparsable JSON with 400
        return 400, "Validation"
    if error.code == "queue_full":
        return 429, "Overloaded"
    if error.status_code == 503:
        return 503, "Unhealthy"
    if error.status_code in (404, 413, 415):  # no such model; over a per-request limit; not JSON's type
        return error.status_code, "Validation"
    if error.status_code >= 500:
        return 424, "Backend"
    return 422, "Validation"


def _message(exc: Exception, error: APIError) -> str:
    if isinstance(exc, InputTooLongError):  # in TEI's words, naming TEI's field
        return (
            f"`inputs` must have at most {exc.max_len} tokens. Given: {exc.num_tokens}; "
            "send truncate true to keep the first tokens"
        )
    return error.message


def tei_error(exc: Exception) -> tuple[int, TeiErrorResponse, dict[str, str]]:
    """Status, TEI body and headers (a 429's ``Retry-After``) answering ``exc``."""
    if isinstance(exc, APIError):
        error = exc
    elif isinstance(exc, PoolragError):
        error = from_poolrag_error(exc)
    else:
        logger.exception("unhandled error while serving a request", exc_info=exc)
        body = TeiErrorResponse(error="internal server error", error_type="Backend")
        return 500, body, {}
    status, error_type = _from_api_error(error)
    if isinstance(exc, InvalidTextError) and not exc.empty:  # TEI never sees it: not JSON to serde_json
        status = 400
    return status, TeiErrorResponse(error=_message(exc, error), error_type=error_type), error.headers


def tei_error_response(exc: Exception) -> JSONResponse:
    status, body, headers = tei_error(exc)
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)
