"""/openapi.json describes what the server accepts and answers; schemathesis holds it to that."""

from __future__ import annotations

import httpx
import jsonschema
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import CheckContext, GenerationMode, Response
from schemathesis.checks import not_a_server_error
from schemathesis.core import NOT_SET
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from .conftest import Served

ENDPOINTS = {
    ("post", "/v1/embeddings"),
    ("post", "/v2/embed"),
    ("post", "/v1/embed"),
    ("post", "/score"),
    ("post", "/v1/score"),
    ("post", "/rerank"),
    ("post", "/v1/rerank"),
    ("post", "/v2/rerank"),
    ("post", "/classify"),
    ("post", "/pooling"),
    ("post", "/tokenize"),
    ("post", "/detokenize"),
    ("get", "/v1/models"),
    ("get", "/v1/models/{model}"),
    ("get", "/health"),
    ("get", "/version"),
    ("get", "/metrics"),
}
#: Text Embeddings Inference's own routes: its error shape and status codes (422, 424, 429)
TEI_ENDPOINTS = {
    ("post", "/"),
    ("post", "/embed"),
    ("post", "/embed_all"),
    ("post", "/embed_sparse"),
    ("post", "/similarity"),
    ("post", "/predict"),
    ("post", "/decode"),
    ("get", "/info"),
}
#: Paths that speak TEI beside another dialect, chosen by the body's fields
TWO_DIALECTS = {"/rerank", "/v1/rerank", "/v2/rerank", "/tokenize"}
ENDPOINTS |= TEI_ENDPOINTS


@pytest.fixture(scope="module")
def openapi(minilm_server: Served, http: httpx.Client) -> dict:
    return http.get(f"{minilm_server.url}/openapi.json").json()


def test_every_endpoint_is_described(openapi: dict) -> None:
    described = {(method, path) for path, item in openapi["paths"].items() for method in item}
    assert described == ENDPOINTS


def test_schema_errors_are_documented_in_each_dialects_shape(openapi: dict) -> None:
    """OpenAI's 400 on its routes, TEI's 400/422 on TEI's, either on a path speaking both."""
    openai_error = {"$ref": "#/components/schemas/ErrorResponse"}
    tei_error = {"$ref": "#/components/schemas/TeiErrorResponse"}
    for path, item in openapi["paths"].items():
        for method, operation in item.items():
            responses = operation["responses"]
            speaks_tei = (method, path) in TEI_ENDPOINTS or path in TWO_DIALECTS
            assert ("422" in responses) == (speaks_tei and method == "post"), (method, path)
            if method == "post":
                error = responses["400"]["content"]["application/json"]["schema"]
                if (method, path) in TEI_ENDPOINTS:
                    assert error == tei_error
                elif path in TWO_DIALECTS:
                    assert error["anyOf"] == [openai_error, tei_error]
                else:
                    assert error == openai_error
                assert {"401", "413", "503"} <= set(responses)
    assert "HTTPValidationError" not in openapi["components"]["schemas"]


def test_embedding_input_forms_are_published(openapi: dict) -> None:
    request = openapi["components"]["schemas"]["EmbeddingRequest"]
    forms = request["properties"]["input"]["anyOf"]
    assert {"type": "string"} in forms
    assert {"type": "array", "items": {"type": "string"}} in forms
    assert {"type": "array", "items": {"type": "integer"}} in forms
    assert {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}} in forms
    assert request["properties"]["encoding_format"]["enum"] == ["float", "base64", "bytes", "bytes_only"]
    assert request["required"] == ["input"]


@pytest.fixture(scope="module")
def api_schema(minilm_server: Served) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(f"{minilm_server.url}/openapi.json")


def _body_is_valid(case: schemathesis.Case) -> bool:
    """Whether ``case``'s body is one its operation's schema allows (JSON Schema 2020-12, as OpenAPI
    3.1's, the document's ``components`` beside it for its ``$ref``s)."""
    if case.body is NOT_SET:
        return False
    document = case.operation.schema.raw_schema
    operation = document["paths"][case.path][case.method.lower()]
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    validator = jsonschema.Draft202012Validator({**schema, "components": document["components"]})
    return validator.is_valid(case.body)


@schemathesis.check
def negative_data_refused(ctx: CheckContext, response: Response, case: schemathesis.Case) -> bool | None:
    """schemathesis' ``negative_data_rejection``, but for a "negative" body that is valid: its negative
    mode can turn a value into one another ``anyOf`` branch allows (an integer ``dimensions`` made
    null, which ``integer | null`` takes), and accepting that body is right."""
    if _body_is_valid(case):
        return None
    return negative_data_rejection(ctx, response, case)


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_refused,
]


CASES = [
    (method, path, mode)
    for method, path in sorted(ENDPOINTS)
    # GET endpoints take no input, so there is nothing to get wrong
    for mode in (
        [GenerationMode.POSITIVE, GenerationMode.NEGATIVE] if method == "post" else [GenerationMode.POSITIVE]
    )
]


@pytest.mark.parametrize(("method", "path", "mode"), CASES, ids=[f"{m}-{p}-{g.value}" for m, p, g in CASES])
def test_server_conforms_to_its_schema(
    api_schema: schemathesis.BaseSchema, method: str, path: str, mode: GenerationMode
) -> None:
    """Requests generated from the schema, valid and invalid: no 5xx, only documented statuses
    and bodies, and whatever the schema forbids is refused."""
    operation = api_schema[path][method.upper()]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
        # the same examples every run: schemathesis' negative mode can take a value another anyOf
        # branch allows for a violation (a null truncate made boolean), so a random run can flake
        derandomize=True,
    )
    def conforms(case: schemathesis.Case) -> None:
        case.call_and_validate(checks=CHECKS, timeout=120)

    conforms()
