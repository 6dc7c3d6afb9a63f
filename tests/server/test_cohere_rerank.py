"""POST /v2/rerank called as Cohere's clients call it: the ``cohere`` client with the fields it and
the frameworks built on it send (Haystack's ``CohereRanker`` and langchain-cohere pass
``max_tokens_per_doc``, 4,096 by default)."""

from __future__ import annotations

import json

import cohere
import httpx
import numpy as np
import pytest

from poolrag import PoolingParams

from .conftest import Served

QUERY = "What is the capital of France?"
DOCUMENTS = [
    "Bananas are rich in potassium.",
    "Paris is the capital and largest city of France.",
    "The Eiffel Tower is in Paris.",
    "France is a country in Western Europe.",
]


def _scores(server: Served, documents: list[str]) -> list[float]:
    return [out.outputs.score for out in server.engine.score(QUERY, documents)]


def _first_tokens(server: Served, text: str, tokens: int) -> str:
    offsets = server.engine.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    return text[: offsets["offset_mapping"][tokens - 1][1]]


def test_the_cohere_client_reranks_with_max_tokens_per_doc_and_priority(cross_encoder_server: Served) -> None:
    client = cohere.ClientV2(base_url=cross_encoder_server.url, api_key="unused", timeout=120)
    answer = client.rerank(
        model=cross_encoder_server.model,
        query=QUERY,
        documents=DOCUMENTS,
        top_n=3,
        max_tokens_per_doc=4096,
        priority=0,
    )
    scores = _scores(cross_encoder_server, DOCUMENTS)
    best = sorted(range(len(DOCUMENTS)), key=lambda i: -scores[i])[:3]
    assert [r.index for r in answer.results] == best
    np.testing.assert_allclose(
        [r.relevance_score for r in answer.results], [scores[i] for i in best], rtol=0, atol=1e-6
    )


@pytest.mark.parametrize("server", ["cross_encoder_server", "minilm_server"])
def test_a_small_max_tokens_per_doc_scores_each_documents_first_tokens(
    server: str, http: httpx.Client, request: pytest.FixtureRequest
) -> None:
    served: Served = request.getfixturevalue(server)
    body = {"query": QUERY, "documents": DOCUMENTS, "max_tokens_per_doc": 3, "return_documents": True}
    answer = http.post(f"{served.url}/v2/rerank", json=body)
    assert answer.status_code == 200, answer.text
    cut = [_first_tokens(served, document, 3) for document in DOCUMENTS]
    assert cut[1] == "Paris is the"
    scores = _scores(served, cut)
    results = answer.json()["results"]
    np.testing.assert_allclose(
        [r["relevance_score"] for r in results], [scores[r["index"]] for r in results], rtol=0, atol=1e-6
    )
    assert [r["document"]["text"] for r in results] == [DOCUMENTS[r["index"]] for r in results]  # as sent


def test_v2_answers_bare_results_as_cohere_v2_does_unless_documents_are_asked_for(
    cross_encoder_server: Served, http: httpx.Client
) -> None:
    """Cohere's v2 rerank answers index and relevance_score only (its SDK dropped return_documents
    and results' document); an explicit return_documents, as older v2 SDKs sent, still echoes."""
    client = cohere.ClientV2(base_url=cross_encoder_server.url, api_key="unused", timeout=120)
    answer = client.rerank(model=cross_encoder_server.model, query=QUERY, documents=DOCUMENTS)
    assert [set(r.model_dump(exclude_none=True)) for r in answer.results] == [
        {"index", "relevance_score"}
    ] * len(DOCUMENTS)
    url = f"{cross_encoder_server.url}/v2/rerank"
    asked = http.post(url, json={"query": QUERY, "documents": DOCUMENTS, "return_documents": True}).json()
    assert [r["document"] for r in asked["results"]] == [{"text": DOCUMENTS[r.index]} for r in answer.results]
    v1 = http.post(f"{cross_encoder_server.url}/v1/rerank", json={"query": QUERY, "documents": DOCUMENTS})
    assert all("document" in r for r in v1.json()["results"])  # Jina's and vLLM's default: echoed


def test_null_max_tokens_per_doc_and_priority_are_the_defaults(
    cross_encoder_server: Served, http: httpx.Client
) -> None:
    url = f"{cross_encoder_server.url}/v2/rerank"
    plain = http.post(url, json={"query": QUERY, "documents": DOCUMENTS}).json()["results"]
    nulls = {"query": QUERY, "documents": DOCUMENTS, "max_tokens_per_doc": None, "priority": None}
    assert http.post(url, json=nulls).json()["results"] == plain
    # the cohere SDK sends a caller's return_documents=None as null (it was a 400)
    client = cohere.Client(base_url=cross_encoder_server.url, api_key="unused")
    kept = client.rerank(model="reranker", query=QUERY, documents=DOCUMENTS, return_documents=None)
    expected = [(r["index"], DOCUMENTS[r["index"]]) for r in plain]
    assert [(r.index, r.document.text) for r in kept.results] == expected


def test_the_v1_client_reranks_objects_by_their_text_with_its_chunking_options(
    cross_encoder_server: Served,
) -> None:
    """Cohere v1's rank_fields (its default, ["text"]) and max_chunks_per_doc: the scores of the
    documents' texts, the objects echoed whole."""
    client = cohere.Client(base_url=cross_encoder_server.url, api_key="unused", timeout=120)
    objects = [{"text": text, "id": f"doc-{i}"} for i, text in enumerate(DOCUMENTS)]
    answer = client.rerank(
        model=cross_encoder_server.model,
        query=QUERY,
        documents=objects,
        rank_fields=["text"],
        max_chunks_per_doc=10,
        return_documents=True,
    )
    scores = _scores(cross_encoder_server, DOCUMENTS)
    assert [r.index for r in answer.results] == sorted(range(len(DOCUMENTS)), key=lambda i: -scores[i])
    np.testing.assert_allclose(
        [r.relevance_score for r in answer.results], [scores[r.index] for r in answer.results], atol=1e-6
    )
    assert [r.document.id for r in answer.results] == [f"doc-{r.index}" for r in answer.results]


def test_a_long_document_with_max_chunks_per_doc_is_scored_as_its_first_chunk(
    cross_encoder_server: Served, http: httpx.Client
) -> None:
    long = "Paris is the capital and largest city of France. " * 80  # over the model's length
    body = {"query": QUERY, "documents": [long], "max_chunks_per_doc": 10}
    answer = http.post(f"{cross_encoder_server.url}/v1/rerank", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.headers["X-Truncated-Inputs"] == "1"
    cut = cross_encoder_server.engine.score(QUERY, [long], PoolingParams(truncate=True))[0].outputs.score
    assert answer.json()["results"][0]["relevance_score"] == pytest.approx(cut, abs=1e-6)


def test_the_clients_read_cohere_s_meta_with_search_units_and_truncation_warnings(
    cross_encoder_server: Served,
) -> None:
    """Cohere's rerank answers always carry ``meta``; code counting usage reads
    ``meta.billed_units.search_units`` (a query with up to 100 documents), and a cut is a warning there."""
    v2 = cohere.ClientV2(base_url=cross_encoder_server.url, api_key="unused", timeout=120)
    many = v2.rerank(
        model=cross_encoder_server.model, query=QUERY, documents=[f"doc {i}" for i in range(101)]
    )
    assert many.meta.api_version.version == "2"
    assert many.meta.billed_units.search_units == 2
    assert many.meta.warnings is None
    long = "Paris is the capital and largest city of France. " * 80  # over the model's length
    v1 = cohere.Client(base_url=cross_encoder_server.url, api_key="unused", timeout=120)
    cut = v1.rerank(model=cross_encoder_server.model, query=QUERY, documents=[long, DOCUMENTS[0]])
    assert cut.meta.api_version.version == "1"
    assert cut.meta.billed_units.search_units == 1
    assert cut.meta.warnings == ["1 of 2 query-document pairs were truncated to fit the model"]


def test_the_v2_client_with_relevant_spans_disabled_ranks_as_without(cross_encoder_server: Served) -> None:
    client = cohere.ClientV2(base_url=cross_encoder_server.url, api_key="unused", timeout=120)
    common = {"model": cross_encoder_server.model, "query": QUERY, "documents": DOCUMENTS}
    plain = client.rerank(**common)
    spans = client.rerank(**common, relevant_spans=cohere.RerankRelevantSpans(mode="disabled"))
    assert [(r.index, r.relevance_score) for r in spans.results] == [
        (r.index, r.relevance_score) for r in plain.results
    ]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_tokens_per_doc", -1),  # 0 is vLLM's default: no cut
        ("max_tokens_per_doc", "many"),
        ("priority", 1),
        ("rank_fields", ["title"]),  # only Cohere's default: the model reads an object's text
        ("relevant_spans", {"mode": "enabled"}),  # no model here gives spans
        ("max_chunks_per_doc", 0),
    ],
)
def test_a_value_that_cannot_be_honoured_is_a_400_naming_its_field(
    cross_encoder_server: Served, http: httpx.Client, field: str, value: object
) -> None:
    body = {"query": QUERY, "documents": DOCUMENTS, field: value}
    answer = http.post(f"{cross_encoder_server.url}/v2/rerank", json=body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"].split(".")[0] == field


def test_a_document_the_cut_cannot_read_is_named_like_any_other(
    cross_encoder_server: Served, http: httpx.Client
) -> None:
    body = {"query": QUERY, "documents": ["Paris is in France.", "a \ud800 b"], "max_tokens_per_doc": 3}
    raw = json.dumps(body)  # ASCII, the surrogate escaped, as a client sends one
    answer = http.post(
        f"{cross_encoder_server.url}/v2/rerank", content=raw, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 400, answer.text
    assert "documents[1]" in answer.json()["error"]["message"]
