"""A folder's named prompts over HTTP: ``prompt_name`` on /v1/embeddings (a poolrag extension, as
sentence-transformers' ``encode(prompt_name=...)``), the names in GET /v1/models, and Cohere's
``classification`` / ``clustering`` input types as the folder's prompts of those names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import cohere
import httpx
import numpy as np
import openai
import pytest
from sentence_transformers import SentenceTransformer

from poolrag import Engine, InvalidInputError, PoolingParams
from poolrag.client import PoolragClient

from .conftest import Served, serve_in_thread

PROMPTS = {
    "query": "query: ",
    "document": "passage: ",
    "classification": "classify: ",
    "Clustering": "group: ",  # EmbeddingGemma's capitals
}
TEXTS = ["The cat sat on the mat.", "Paris is the capital of France."]


@pytest.fixture(scope="module")
def prompted_engine(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Engine:
    """all-MiniLM-L6-v2 saved again by sentence-transformers with four named prompts."""
    folder = tmp_path_factory.mktemp("prompted") / "minilm-prompts"
    SentenceTransformer(str(minilm_path), device="cpu", prompts=PROMPTS).save(str(folder))
    return Engine(folder)


@pytest.fixture(scope="module")
def prompted_server(prompted_engine: Engine) -> Iterator[Served]:
    with serve_in_thread(prompted_engine, served_model_names=("prompted",)) as url:
        yield Served(url, "prompted", prompted_engine)


def _named(engine: Engine, name: str) -> np.ndarray:
    return engine.embed_array(TEXTS, PoolingParams(prompt_name=name))


def test_the_models_list_names_the_folders_prompts(prompted_server: Served) -> None:
    (card,) = httpx.get(f"{prompted_server.url}/v1/models", timeout=30).json()["data"]
    assert set(card["prompt_names"]) == set(PROMPTS)


def test_openai_client_sends_prompt_name_and_gets_the_named_prompts_vectors(prompted_server: Served) -> None:
    client = openai.OpenAI(base_url=f"{prompted_server.url}/v1", api_key="unused")
    response = client.embeddings.create(
        model=prompted_server.model, input=TEXTS, extra_body={"prompt_name": "classification"}
    )
    got = np.array([d.embedding for d in response.data], dtype=np.float32)
    np.testing.assert_allclose(got, _named(prompted_server.engine, "classification"), atol=1e-6, rtol=0)
    plain = prompted_server.engine.embed_array(TEXTS)
    assert not np.allclose(got, plain, atol=1e-3)  # the prompt changed the vectors
    np.testing.assert_allclose(
        got, prompted_server.engine.embed_array([f"classify: {t}" for t in TEXTS]), atol=1e-5, rtol=0
    )


def test_an_unknown_prompt_name_is_a_400_naming_the_field_and_the_known_names(
    prompted_server: Served,
) -> None:
    response = httpx.post(
        f"{prompted_server.url}/v1/embeddings",
        json={"model": prompted_server.model, "input": TEXTS, "prompt_name": "summary"},
        timeout=30,
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "prompt_name"
    assert "'summary' is not one of this model's prompts" in error["message"]
    assert "'classification'" in error["message"]


def test_poolrag_client_checks_and_sends_prompt_name(prompted_server: Served) -> None:
    with PoolragClient(prompted_server.url, model=prompted_server.model) as client:
        assert set(client.facts.prompt_names) == set(PROMPTS)
        np.testing.assert_allclose(
            client.embed_array(TEXTS, PoolingParams(prompt_name="Clustering")),
            _named(prompted_server.engine, "Clustering"),
            atol=1e-6,
            rtol=0,
        )
        with pytest.raises(InvalidInputError, match="'summary' is not one of this model's prompts"):
            client.embed_array(TEXTS, PoolingParams(prompt_name="summary"))


@pytest.mark.parametrize(
    ("input_type", "name"),
    [
        ("search_query", "query"),
        ("search_document", "document"),
        ("classification", "classification"),
        ("clustering", "Clustering"),
    ],
)
def test_cohere_input_types_take_the_folders_prompt_they_name(
    prompted_server: Served, input_type: str, name: str
) -> None:
    """search_query / search_document: the query and document prompts; classification / clustering:
    the folder's prompt of that name, in any case."""
    client = cohere.ClientV2(base_url=prompted_server.url, api_key="unused", timeout=120)
    response = client.embed(
        texts=TEXTS, model=prompted_server.model, input_type=input_type, embedding_types=["float"]
    )
    got = np.array(response.embeddings.float_, dtype=np.float32)
    np.testing.assert_allclose(got, _named(prompted_server.engine, name), atol=1e-6, rtol=0)


def test_cohere_classification_without_such_a_prompt_uses_the_models_default(minilm_server: Served) -> None:
    client = cohere.ClientV2(base_url=minilm_server.url, api_key="unused", timeout=120)
    response = client.embed(
        texts=TEXTS, model=minilm_server.model, input_type="classification", embedding_types=["float"]
    )
    got = np.array(response.embeddings.float_, dtype=np.float32)
    np.testing.assert_allclose(got, minilm_server.engine.embed_array(TEXTS), atol=1e-6, rtol=0)


@pytest.mark.parametrize("path", ["/v2/embed", "/v1/embed"])
def test_cohere_embed_without_input_type_is_refused_where_queries_and_documents_differ(
    prompted_server: Served, minilm_server: Served, path: str
) -> None:
    """Cohere's v3+ models refuse a request without input_type; a model with query and document
    prompts does too, rather than embed a query as a document."""
    refused = httpx.post(f"{prompted_server.url}{path}", json={"texts": TEXTS}, timeout=60)
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["param"] == "input_type" and "search_query" in error["message"]
    assert "(its prompts document, query)" in error["message"]
    # a model without such prompts embeds a text alike either way: omitted is search_document
    plain = httpx.post(f"{minilm_server.url}{path}", json={"texts": TEXTS, "embedding_types": ["float"]})
    assert plain.status_code == 200, plain.text
    got = np.array(plain.json()["embeddings"]["float"], dtype=np.float32)
    np.testing.assert_allclose(got, minilm_server.engine.embed_array(TEXTS), atol=1e-6, rtol=0)


def test_the_cohere_v1_client_without_input_type_gets_cohere_s_400(prompted_server: Served) -> None:
    client = cohere.Client(base_url=prompted_server.url, api_key="unused", timeout=120)
    with pytest.raises(cohere.BadRequestError) as raised:
        client.embed(texts=TEXTS, model=prompted_server.model)
    assert raised.value.body["error"]["param"] == "input_type"
