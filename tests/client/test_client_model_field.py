"""``PoolragClient(model=...)`` against one server running two models: each client reads its own
model's facts and its requests reach that model."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from poolrag import Engine, InvalidInputError
from poolrag.client import PoolragClient
from poolrag.server import ServerSettings
from poolrag.server.app import create_models_app
from poolrag.testing.live_server import LiveServer

PASSAGES = ["Paris is the capital of France.", "Pandas eat bamboo.", "The Eiffel Tower is in Paris."]
QUERY = "What is the capital of France?"


@pytest.fixture(scope="module")
def cross_encoder_engine(assets: Path) -> Engine:
    return Engine(assets / "ms-marco-MiniLM-L-12-v2")


def _served(*models: tuple[Engine, str]) -> Iterator[str]:
    """One server of ``models`` (engine, served name), in that order."""
    app = create_models_app([(engine, ServerSettings(served_model_names=(name,))) for engine, name in models])
    with LiveServer(app) as live:
        yield live.url


@pytest.fixture(scope="module")
def two_model_url(minilm_engine: Engine, cross_encoder_engine: Engine) -> Iterator[str]:
    yield from _served((minilm_engine, "embedder"), (cross_encoder_engine, "reranker"))


def test_each_client_reaches_the_model_it_names(
    two_model_url: str, minilm_engine: Engine, cross_encoder_engine: Engine
) -> None:
    with (
        PoolragClient(two_model_url, model="embedder") as embedder,
        PoolragClient(two_model_url, model="reranker") as reranker,
    ):
        vectors = embedder.embed_array(PASSAGES)
        scores = reranker.score_array(QUERY, PASSAGES)
        ranked = reranker.rerank(QUERY, PASSAGES, top_n=1)
        assert embedder.facts.model_name == "embedder" and reranker.facts.model_name == "reranker"
        assert embedder.facts.model_identity != reranker.facts.model_identity
    np.testing.assert_array_equal(vectors, minilm_engine.embed_array(PASSAGES))
    np.testing.assert_allclose(scores, cross_encoder_engine.score_array(QUERY, PASSAGES), atol=1e-6)
    assert ranked[0].index == int(np.argmax(scores))


def test_a_client_naming_no_model_gets_the_first_and_an_unknown_name_is_refused(two_model_url: str) -> None:
    with PoolragClient(two_model_url) as default:
        assert default.facts.model_name == "embedder"
    with PoolragClient(two_model_url, model="colbert") as unknown, pytest.raises(InvalidInputError) as caught:
        unknown.embed_array(["x"])
    assert "model 'colbert' is not served here; use 'embedder', 'reranker'" in str(caught.value)


def test_a_client_naming_the_folder_the_server_was_given_reaches_that_model(
    two_model_url: str, minilm_path: Path, minilm_engine: Engine
) -> None:
    """The server answers ``"model": <the folder it loaded>`` (as ``vllm serve ./folder`` does), so
    the string a user gave ``poolrag serve`` names the model to the client too: it was refused as
    "not served here" before a request was sent."""
    with PoolragClient(two_model_url, model=str(minilm_path)) as client:
        vectors = client.embed_array(PASSAGES)
        assert client.facts.model_name == str(minilm_path)
    with PoolragClient(two_model_url, model=str(minilm_path)) as client:
        awaited = asyncio.run(client.aembed_array(PASSAGES))
    np.testing.assert_array_equal(vectors, minilm_engine.embed_array(PASSAGES))
    np.testing.assert_array_equal(awaited, vectors)


@pytest.fixture(scope="module")
def reranker_first_url(minilm_engine: Engine, cross_encoder_engine: Engine) -> Iterator[str]:
    yield from _served((cross_encoder_engine, "reranker"), (minilm_engine, "embedder"))


@pytest.mark.parametrize("order", ["embedder first", "reranker first"])
def test_a_client_naming_no_model_reaches_the_model_the_server_runs_each_task_with(
    order: str,
    two_model_url: str,
    reranker_first_url: str,
    minilm_engine: Engine,
    cross_encoder_engine: Engine,
) -> None:
    """As the server routes a request naming no model (the first that runs the task; for scores the
    first cross-encoder), the client reads that model's facts and names it: embeddings come from the
    embedder and scores from the reranker in either order (a client that read the first model's
    facts was told on every score that "the server now serves other weights")."""
    import asyncio

    url = two_model_url if order == "embedder first" else reranker_first_url
    want_scores = cross_encoder_engine.score_array(QUERY, PASSAGES)
    with PoolragClient(url) as client:
        np.testing.assert_array_equal(client.embed_array(PASSAGES), minilm_engine.embed_array(PASSAGES))
        np.testing.assert_allclose(client.score_array(QUERY, PASSAGES), want_scores, atol=1e-6)
        assert client.rerank(QUERY, PASSAGES, top_n=1)[0].index == int(np.argmax(want_scores))
        np.testing.assert_allclose(asyncio.run(client.ascore_array(QUERY, PASSAGES)), want_scores, atol=1e-6)
    with PoolragClient(url, task="score") as reranking:
        assert reranking.facts.model_name == "reranker"
    with PoolragClient(url, task="embed") as embedding:
        assert embedding.facts.model_name == "embedder"
