"""Errors in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}`` (and Jina's
``"detail"``, Cohere's ``"message"``).

Clients written for OpenAI (the ``openai`` package, LangChain) read ``error.message`` and the
status code, so every failure, including schema validation and the middleware's 401/413/503,
is answered in that shape. Client mistakes are 4xx; only real server faults are 500.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from poolrag.errors import (
    DimensionsError,
    EngineClosedError,
    InputTooLongError,
    InputTypeError,
    InvalidInputError,
    InvalidTextError,
    OutOfMemoryError,
    PoolragError,
    UnsupportedTaskError,
    cut_name,
)

logger = logging.getLogger(__name__)

#: OpenAI's ``type`` of each status, and the ``code`` when the raiser gives none (every answer carries one).
_TYPE_AND_CODE = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("authentication_error", "invalid_api_key"),
    404: ("invalid_request_error", "not_found"),  # OpenAI's type for an unknown model or URL
    405: ("invalid_request_error", "method_not_allowed"),
    408: ("invalid_request_error", "request_timeout"),
    413: ("invalid_request_error", "request_too_large"),
    415: ("invalid_request_error", "unsupported_media_type"),
    503: ("service_unavailable_error", "unavailable"),
}


class APIError(Exception):
    """An error answered to the client as is (status, message, and OpenAI's type/param/code)."""

    def __init__(
        self,
        status_code: int,
        message: str,
        *,
        type: str | None = None,
        param: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        default_type, default_code = _TYPE_AND_CODE.get(status_code, ("server_error", "internal_error"))
        self.type = type or default_type
        self.param = param
        self.code = code or default_code
        self.headers = dict(headers or {})


def error_response(error: APIError) -> JSONResponse:
    """OpenAI's body, and the message again as ``detail``, where Jina's API (and FastAPI) put it,
    and as ``message``, where Cohere's does: Jina's clients raise ``resp["detail"]`` (they failed on
    a KeyError that lost the message), Cohere's SDK errors carry the body as ``{"message", ...}``."""
    info = {"message": error.message, "type": error.type, "param": error.param, "code": error.code}
    body = {"error": info, "detail": error.message, "message": error.message}
    return JSONResponse(body, status_code=error.status_code, headers=error.headers)


def from_poolrag_error(exc: PoolragError) -> APIError:
    """Map the engine's errors: anything the caller caused is a 400 with the engine's message; a
    fault (500) is logged with its traceback, whichever dialect answers it."""
    if isinstance(exc, InputTooLongError):
        return APIError(400, str(exc), param=exc.param or "input", code="context_length_exceeded")
    if isinstance(exc, DimensionsError):
        return APIError(400, str(exc), param="dimensions", code="invalid_dimensions")
    if isinstance(exc, UnsupportedTaskError):
        return APIError(400, str(exc), param=exc.param, code="unsupported_task")
    if isinstance(exc, InputTypeError):
        return APIError(400, str(exc), param=exc.param, code="invalid_type")
    if isinstance(exc, InvalidTextError):  # the engine's input stage, the one check of each text
        return APIError(400, str(exc), param=exc.field, code="empty_input" if exc.empty else "invalid_value")
    if isinstance(exc, InvalidInputError):
        return APIError(400, str(exc), param=exc.param, code="invalid_value")
    if isinstance(exc, EngineClosedError):  # shutting down: another replica (or a retry) can answer
        return APIError(
            503,
            "the server is shutting down (or its model stopped), so the request was not run; retry it "
            "on another replica or once the server is back",
            type="server_error",
            code="engine_closed",
            headers={"Retry-After": "1"},
        )
    if isinstance(exc, OutOfMemoryError):  # the server's capacity, not a bug: this request alone fails
        error = APIError(500, str(exc), type="server_error", code="out_of_memory")
    else:
        error = APIError(500, f"the model failed: {exc}", type="server_error", code="model_error")
    logger.error("engine error: %s", exc, exc_info=exc)
    return error


_TYPE_TAGS = frozenset({"body", "str", "int", "bool", "float", "list", "dict", "none"})


def _is_field(part: object) -> bool:
    """Field names and list indices; not pydantic's union branch tags (``function-after[...]``,
    ``str``, a model's class name), which mean nothing to a client."""
    if isinstance(part, int):
        return True
    return isinstance(part, str) and part.isidentifier() and part[0].islower() and part not in _TYPE_TAGS


def _loc_path(loc: Sequence[Any]) -> str:
    return ".".join(str(p) for p in loc if _is_field(p))


def _error_path(err: Mapping[str, Any]) -> str:
    """Where an error is; an unknown field is named as the client spelt it, whatever it looks like
    (cut short: the answer repeats it four times)."""
    loc = tuple(err.get("loc", ()))
    if err.get("type") == "extra_forbidden" and loc:
        return ".".join(filter(None, (_loc_path(loc[:-1]), cut_name(str(loc[-1])))))
    return _loc_path(loc)


def _error_message(err: Mapping[str, Any]) -> str:
    if err.get("type") == "extra_forbidden":
        return "not a field this server takes (refused rather than ignored)"
    if err.get("type") in ("model_type", "model_attributes_type"):  # pydantic names its class here
        return "must be a JSON object"
    if err.get("type") == "value_error" and (ctx := err.get("ctx") or {}).get("error") is not None:
        return str(ctx["error"])  # our own validator's words, without pydantic's "Value error, "
    return str(err.get("msg", "invalid value"))


def _deepest(errors: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The errors of the union branch that got furthest: a field that may be a string or a list
    of parts, sent as a list, is wrong inside the list, not for not being a string."""
    paths = [_error_path(err) for err in errors]
    return [
        err
        for err, path in zip(errors, paths, strict=True)
        if not any(other.startswith(f"{path}.") for other in paths if path)
    ]


def from_validation_error(exc: RequestValidationError | ValidationError) -> APIError:
    """A 400 (as OpenAI answers), naming the first offending field."""
    errors = list(exc.errors())
    if not errors:
        return APIError(400, "invalid request")
    first = errors[0]
    if first.get("type") == "json_invalid":
        detail = (first.get("ctx") or {}).get("error", "")
        return APIError(
            400, f"the request body is not valid JSON: {detail}".rstrip(": "), code="invalid_json"
        )
    param = _error_path(first) or None
    if first.get("type") == "too_short" and first.get("input") == []:  # no inputs: one code on every route
        return APIError(400, f"{param or 'request body'} must not be empty", param=param, code="empty_input")
    errors = _deepest(errors)
    messages = []
    for err in errors[:3]:
        path = _error_path(err)
        if not path and err.get("type") == "value_error":
            messages.append(_error_message(err))  # a whole-request rule names its own fields
        else:
            messages.append(f"{path or 'request body'}: {_error_message(err)}")
    if len(errors) > 3:
        messages.append(f"and {len(errors) - 3} more")
    return APIError(400, "; ".join(messages), param=param)


def log_refusal(request: Request, status: int, code: str, message: str) -> None:
    """The reason of a refused request at DEBUG (the access line says only its status); the
    message is cut short, since some name parts of the input."""
    if logger.isEnabledFor(logging.DEBUG):
        shown = message if len(message) <= 300 else message[:297] + "..."
        logger.debug("%s %s answered %d %s: %s", request.method, request.url.path, status, code, shown)


def _from_http_error(exc: StarletteHTTPException) -> APIError:
    try:
        phrase = HTTPStatus(exc.status_code).phrase
    except ValueError:
        phrase = "error"
    message = exc.detail if isinstance(exc.detail, str) and exc.detail else phrase
    return APIError(exc.status_code, message, headers=exc.headers)


def install_error_handlers(app: FastAPI) -> None:
    async def on_error(request: Request, exc: Exception) -> JSONResponse:
        if isinstance(exc, PoolragError):
            error = from_poolrag_error(exc)
        elif isinstance(exc, RequestValidationError):
            error = from_validation_error(exc)
        elif isinstance(exc, StarletteHTTPException):
            error = _from_http_error(exc)
        else:
            assert isinstance(exc, APIError)
            error = exc
        log_refusal(request, error.status_code, error.code, error.message)
        return error_response(error)

    async def on_unexpected(_: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error while serving a request", exc_info=exc)
        return error_response(APIError(500, "internal server error"))

    for handled in (APIError, PoolragError, RequestValidationError, StarletteHTTPException):
        app.add_exception_handler(handled, on_error)
    app.add_exception_handler(Exception, on_unexpected)
