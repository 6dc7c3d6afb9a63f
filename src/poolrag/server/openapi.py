"""Make ``/openapi.json`` describe the server as it answers.

FastAPI documents schema failures as 422; this server answers them with 400 in OpenAI's error
shape (as OpenAI does), an unknown ``model`` is 404, and the middleware may answer 401, 413 and 503,
so each operation lists exactly those. Text Embeddings Inference's routes answer their own 422s
(:mod:`poolrag.server.tei_errors`), which stay documented.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from poolrag.server.schemas import ErrorResponse

_ERROR = {"model": ErrorResponse}

#: Error answers of an endpoint that runs the engine.
ENGINE_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {**_ERROR, "description": "Invalid request (schema, input, task)"},
    401: {**_ERROR, "description": "Missing or wrong API key (when the server has one)"},
    404: {**_ERROR, "description": "The request's model is not served here (the answer names those served)"},
    413: {**_ERROR, "description": "Request body over the server's limit"},
    503: {**_ERROR, "description": "Queue full (retry after the Retry-After seconds) or shutting down"},
}
#: Error answers of an endpoint without a body that still needs the key.
READ_ERRORS: dict[int | str, dict[str, Any]] = {401: ENGINE_ERRORS[401]}


def install_openapi(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, description=app.description, routes=app.routes
            )
            for path_item in schema.get("paths", {}).values():
                for operation in path_item.values():
                    responses = operation.get("responses", {})
                    if "HTTPValidationError" in str(responses.get("422")):  # FastAPI's, not TEI's own
                        responses.pop("422")
            components = schema.get("components", {}).get("schemas", {})
            for unused in ("HTTPValidationError", "ValidationError"):
                components.pop(unused, None)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
