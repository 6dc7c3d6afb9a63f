"""/rerank's fused second stage on a real server: with ``first_stage_scores`` the cross-encoder's
scores are mixed with them (z-scores, half and half by default); without any first-stage
information the answer is plain reranking, as Jina and Cohere clients expect. Expected scores are
computed by hand here from the engine's own scores."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from poolrag.server.schemas import VllmRequestBody

from .conftest import Served

QUERY = "What is the capital of France?"
DOCUMENTS = [
    "Bananas are rich in potassium.",
    "Paris is the capital and largest city of France.",
    "The Eiffel Tower is in Paris.",
    "Mount Everest is the highest mountain.",
    "France is a country in Western Europe.",
]
FIRST_STAGE = [0.61, 0.52, 0.58, 0.12, 0.55]  # a retriever that put the right answer fourth
PATHS = ["/rerank", "/v1/rerank", "/v2/rerank"]


def _engine_scores(server: Served) -> np.ndarray:
    return np.array([out.outputs.score for out in server.engine.score(QUERY, DOCUMENTS)])


def _z(values: list[float] | np.ndarray) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64)
    return (x - x.mean()) / x.std()


def _ranks(values: list[float] | np.ndarray) -> np.ndarray:
    order = np.argsort(-np.asarray(values), kind="stable")
    ranks = np.empty(len(order), dtype=np.int64)
    ranks[order] = np.arange(1, len(order) + 1)
    return ranks


def _check(body: dict, expected: np.ndarray, raw: np.ndarray | None) -> None:
    order = list(np.argsort(-expected, kind="stable"))[: len(body["results"])]
    assert [r["index"] for r in body["results"]] == order
    np.testing.assert_allclose([r["relevance_score"] for r in body["results"]], expected[order], atol=1e-6)
    if raw is None:
        assert all("rerank_score" not in r for r in body["results"])
    else:
        np.testing.assert_allclose([r["rerank_score"] for r in body["results"]], raw[order], atol=1e-6)


@pytest.mark.parametrize("path", PATHS)
def test_first_stage_scores_are_fused_half_and_half_by_default(
    cross_encoder_server: Served, http: httpx.Client, path: str
) -> None:
    request = {"query": QUERY, "documents": DOCUMENTS, "first_stage_scores": FIRST_STAGE}
    body = http.post(f"{cross_encoder_server.url}{path}", json=request).json()
    raw = _engine_scores(cross_encoder_server)
    _check(body, 0.5 * _z(FIRST_STAGE) + 0.5 * _z(raw), raw)


def test_the_weight_and_top_n_apply_after_fusing_over_every_document(
    cross_encoder_server: Served, http: httpx.Client
) -> None:
    request = {
        "query": QUERY,
        "documents": DOCUMENTS,
        "first_stage_scores": FIRST_STAGE,
        "rerank_weight": 0.8,
        "top_n": 2,
    }
    body = http.post(f"{cross_encoder_server.url}/rerank", json=request).json()
    raw = _engine_scores(cross_encoder_server)
    assert len(body["results"]) == 2
    _check(body, 0.2 * _z(FIRST_STAGE) + 0.8 * _z(raw), raw)


def test_rrf_fuses_ranks_and_fuse_without_scores_uses_the_documents_order(
    cross_encoder_server: Served, http: httpx.Client
) -> None:
    raw = _engine_scores(cross_encoder_server)
    url = f"{cross_encoder_server.url}/v1/rerank"
    rrf = {"query": QUERY, "documents": DOCUMENTS, "first_stage_scores": FIRST_STAGE, "second_stage": "rrf"}
    _check(http.post(url, json=rrf).json(), 1 / (60 + _ranks(FIRST_STAGE)) + 1 / (60 + _ranks(raw)), raw)
    by_order = {"query": QUERY, "documents": DOCUMENTS, "second_stage": "fuse"}
    _check(http.post(url, json=by_order).json(), 1 / (60 + np.arange(1, 6)) + 1 / (60 + _ranks(raw)), raw)


def test_without_first_stage_information_or_with_replace_the_scores_are_the_rerankers(
    cross_encoder_server: Served, http: httpx.Client
) -> None:
    raw = _engine_scores(cross_encoder_server)
    url = f"{cross_encoder_server.url}/v2/rerank"
    plain = http.post(url, json={"query": QUERY, "documents": DOCUMENTS}).json()
    _check(plain, raw, None)
    replace = {
        "query": QUERY,
        "documents": DOCUMENTS,
        "first_stage_scores": FIRST_STAGE,
        "second_stage": "replace",
    }
    assert http.post(url, json=replace).json()["results"] == plain["results"]


def test_scores_near_the_float_limit_fuse_like_their_scaled_down_copies(
    cross_encoder_server: Served, http: httpx.Client
) -> None:
    huge = [score * 1e307 for score in FIRST_STAGE]
    url = f"{cross_encoder_server.url}/rerank"
    body = http.post(url, json={"query": QUERY, "documents": DOCUMENTS, "first_stage_scores": huge}).json()
    raw = _engine_scores(cross_encoder_server)
    _check(body, 0.5 * _z(FIRST_STAGE) + 0.5 * _z(raw), raw)


@pytest.mark.parametrize(
    ("extra", "param", "message"),
    [
        ({"first_stage_scores": [1.0, 2.0]}, "first_stage_scores", "has 2 scores for 5 documents"),
        ({"first_stage_scores": ["1", 2, 3, 4, 5]}, "first_stage_scores", "valid number"),
        ({"second_stage": "mix"}, "second_stage", "second_stage"),
        (
            {"first_stage_scores": FIRST_STAGE, "rerank_weight": 1.5},
            "rerank_weight",
            "less than or equal to 1",
        ),
        ({"rerank_weight": 0.3}, "rerank_weight", "no effect"),
    ],
)
def test_bad_second_stage_fields_get_400_naming_the_field(
    cross_encoder_server: Served, http: httpx.Client, extra: dict, param: str, message: str
) -> None:
    response = http.post(
        f"{cross_encoder_server.url}/rerank", json={"query": QUERY, "documents": DOCUMENTS, **extra}
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"].startswith(param) and error["code"] == "invalid_request"  # item index included
    assert message in error["message"]


@pytest.mark.parametrize("value", [b"NaN", b"Infinity", b"-Infinity"])
def test_non_finite_first_stage_scores_are_refused(
    cross_encoder_server: Served, http: httpx.Client, value: bytes
) -> None:
    content = b'{"query": "q", "documents": ["a", "b"], "first_stage_scores": [1.0, ' + value + b"]}"
    response = http.post(
        f"{cross_encoder_server.url}/rerank", content=content, headers={"content-type": "application/json"}
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == "first_stage_scores.1"


@pytest.mark.parametrize("value", [b"NaN", b"Infinity"])
def test_a_non_finite_rerank_weight_is_refused_as_not_a_finite_number(
    cross_encoder_server: Served, http: httpx.Client, value: bytes
) -> None:
    content = b'{"query": "q", "documents": ["a", "b"], "first_stage_scores": [1.0, 2.0], "rerank_weight": '
    response = http.post(
        f"{cross_encoder_server.url}/rerank",
        content=content + value + b"}",
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == "rerank_weight" and "finite number" in error["message"], error


def test_the_fields_are_published(minilm_server: Served, http: httpx.Client) -> None:
    schemas = http.get(f"{minilm_server.url}/openapi.json").json()["components"]["schemas"]
    request = schemas["RerankRequest"]["properties"]
    assert {"first_stage_scores", "second_stage", "rerank_weight"} <= set(request)
    assert "rerank_score" in schemas["RerankResult"]["properties"]
    assert set(request) - {"first_stage_scores", "second_stage", "rerank_weight"} == {
        "query",
        "documents",
        "top_n",
        "return_documents",
        "max_tokens_per_doc",
        "max_tokens_per_query",  # vLLM's scoring fields
        "instruction",
        "chat_template_kwargs",
        "rank_fields",  # Cohere v1's, its default only
        "max_chunks_per_doc",  # Cohere v1's
        "relevant_spans",  # Cohere v2's, disabled only
        "use_activation",
        *VllmRequestBody.model_fields,  # model, user, truncate_prompt_tokens, request_id, ...
    }
