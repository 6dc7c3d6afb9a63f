"""POST /rerank, /v1/rerank, /v2/rerank (Jina / Cohere shape) for every kind of scoring model."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from .conftest import Served

QUERY = "What is the capital of France?"
DOCUMENTS = [
    "Bananas are rich in potassium.",
    "Paris is the capital and largest city of France.",
    "The Eiffel Tower is in Paris.",
    "Mount Everest is the highest mountain.",
    "France is a country in Western Europe.",
]
PATHS = ["/rerank", "/v1/rerank", "/v2/rerank"]
SERVERS = ["cross_encoder_server", "minilm_server", "colbert_server"]  # cross-encoder, cosine, MaxSim


@pytest.fixture(params=SERVERS)
def scorer(request: pytest.FixtureRequest) -> Served:
    return request.getfixturevalue(request.param)


def _offline_order(server: Served) -> tuple[list[int], list[float]]:
    scores = [out.outputs.score for out in server.engine.score(QUERY, DOCUMENTS)]
    return sorted(range(len(scores)), key=lambda i: -scores[i]), scores


@pytest.mark.parametrize("path", PATHS)
def test_order_and_scores_equal_engine_score(scorer: Served, http: httpx.Client, path: str) -> None:
    body = http.post(f"{scorer.url}{path}", json={"query": QUERY, "documents": DOCUMENTS}).json()
    order, scores = _offline_order(scorer)
    assert [r["index"] for r in body["results"]] == order
    np.testing.assert_allclose(
        [r["relevance_score"] for r in body["results"]], [scores[i] for i in order], rtol=0, atol=1e-6
    )
    if path == "/v2/rerank":  # Cohere v2 answers index and relevance_score only
        assert all("document" not in r for r in body["results"])
    else:  # Jina and vLLM echo each document
        assert [r["document"]["text"] for r in body["results"]] == [DOCUMENTS[i] for i in order]
    tokens = sum(out.num_tokens for out in scorer.engine.score(QUERY, DOCUMENTS))
    assert body["usage"] == {"prompt_tokens": tokens, "total_tokens": tokens}  # vLLM's RerankUsage
    assert body["model"] == scorer.model


def test_top_n_keeps_the_best_and_documents_can_be_left_out(scorer: Served, http: httpx.Client) -> None:
    body = http.post(
        f"{scorer.url}/v1/rerank",
        json={"query": QUERY, "documents": DOCUMENTS, "top_n": 2, "return_documents": False},
    ).json()
    order, _ = _offline_order(scorer)
    assert [r["index"] for r in body["results"]] == order[:2]
    assert all("document" not in r for r in body["results"])


def test_document_objects_are_accepted_like_strings(cross_encoder_server: Served, http: httpx.Client) -> None:
    url = f"{cross_encoder_server.url}/rerank"
    as_strings = http.post(url, json={"query": QUERY, "documents": DOCUMENTS}).json()
    as_objects = http.post(url, json={"query": QUERY, "documents": [{"text": d} for d in DOCUMENTS]}).json()
    assert as_objects["results"] == as_strings["results"]


def test_document_objects_keep_their_other_keys_and_come_back_as_given(
    cross_encoder_server: Served, http: httpx.Client
) -> None:
    """Cohere v1 and Jina callers send ids and metadata beside the text; Cohere v1 echoes them."""
    given: list = [
        {"text": DOCUMENTS[0], "id": "a1"},
        {"id": "a2", "text": DOCUMENTS[1], "meta": {"source": None, "pages": [3, 4]}, "score": 0.5},
        DOCUMENTS[2],
        {"text": DOCUMENTS[3], "title": "Everest", "tags": []},
        {"text": DOCUMENTS[4], "note": None},
    ]
    url = f"{cross_encoder_server.url}/v1/rerank"
    as_strings = http.post(url, json={"query": QUERY, "documents": DOCUMENTS}).json()
    answer = http.post(url, json={"query": QUERY, "documents": given})
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert [(r["index"], r["relevance_score"]) for r in results] == [
        (r["index"], r["relevance_score"]) for r in as_strings["results"]
    ]  # ranked by the text alone
    for result in results:
        document = given[result["index"]]
        assert result["document"] == ({"text": document} if isinstance(document, str) else document)


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (b'{"text": "a", "id": "\\ud800"}', "not valid Unicode"),  # could not be written back
        (b'{"text": "a", "meta": {"weight": 1e400}}', "not finite"),  # would come back as null
        (  # pydantic's serializer stops near 255 levels: refused before the model runs, not a 500
            b'{"text": "a", "meta": ' + b"[" * 256 + b"]" * 256 + b"}",
            "nests more than 64 levels deep",
        ),
        (b'{"id": "a1", "title": "no text"}', "an object with a 'text' string"),
        (b'{"text": 7, "id": "a1"}', "an object with a 'text' string"),
    ],
)
def test_document_objects_that_cannot_be_ranked_or_echoed_are_refused(
    minilm_server: Served, http: httpx.Client, raw: bytes, fragment: str
) -> None:
    body = b'{"query": "q", "documents": ["fine", ' + raw + b"]}"
    answer = http.post(
        f"{minilm_server.url}/rerank", content=body, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["param"] == "documents.1" and fragment in error["message"]


def test_top_n_beyond_the_documents_returns_them_all(minilm_server: Served, http: httpx.Client) -> None:
    body = http.post(
        f"{minilm_server.url}/rerank", json={"query": QUERY, "documents": DOCUMENTS, "top_n": 50}
    ).json()
    assert sorted(r["index"] for r in body["results"]) == list(range(len(DOCUMENTS)))


def test_a_real_embedding_model_ranks_the_answer_first(minilm_server: Served, http: httpx.Client) -> None:
    body = http.post(f"{minilm_server.url}/v2/rerank", json={"query": QUERY, "documents": DOCUMENTS}).json()
    assert body["results"][0]["index"] == 1
    assert body["results"][-1]["index"] in (0, 3)


def _part(text: str) -> dict[str, object]:
    return {"content": [{"type": "text", "text": text}]}


def test_vllm_s_content_query_and_documents_rank_like_strings(
    cross_encoder_server: Served, http: httpx.Client
) -> None:
    """Current vLLM takes ``query: ScoreInput`` and ``documents: ScoreInput | list[ScoreInput]``: a
    ``{"content": [part]}`` query, a list mixing strings and content documents, one bare document.
    Each was a 400 ("query: Input should be a valid string", "documents.1: must be a string or an
    object ...", "documents: Input should be a valid list"). A content document comes back as vLLM
    echoes it, its parts under ``multi_modal``."""
    url = f"{cross_encoder_server.url}/rerank"
    documents = ["Bananas are yellow.", "Paris is the capital of France."]
    outputs = cross_encoder_server.engine.score("capital?", documents)
    want = {i: out.outputs.score for i, out in enumerate(outputs)}
    body = {"query": _part("capital?"), "documents": [documents[0], _part(documents[1])]}
    answer = http.post(url, json=body)
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert {r["index"]: pytest.approx(r["relevance_score"], abs=1e-6) for r in results} == want
    echoed = {r["index"]: r["document"] for r in results}
    content_echo = {"text": None, "multi_modal": _part(documents[1])["content"]}
    assert echoed == {0: {"text": documents[0]}, 1: content_echo}
    bare = http.post(url, json={"query": "capital?", "documents": documents[1]})
    assert bare.status_code == 200, bare.text
    assert [(r["index"], r["document"]) for r in bare.json()["results"]] == [(0, {"text": documents[1]})]


def test_a_content_document_of_several_parts_is_one_document_refused(
    cross_encoder_server: Served, http: httpx.Client
) -> None:
    """vLLM's ``documents: {"content": [text, image]}`` is one document of two parts, fused; it was
    ranked here as two documents."""
    fused = {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    answer = http.post(f"{cross_encoder_server.url}/rerank", json={"query": "q", "documents": fused})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["message"].startswith("documents.content has 2 parts, which vLLM fuses")
