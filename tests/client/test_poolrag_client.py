"""PoolragClient against a live ``poolrag serve`` app: the engine's numpy results, exactly, sync
and async; long lists split into requests; errors mapped onto poolrag's error family."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from live_server import serve
from rag_corpus import API_KEY, TEXTS

from poolrag import (
    DimensionsError,
    Engine,
    InputTypeError,
    InvalidInputError,
    PoolingParams,
    UnsupportedTaskError,
)
from poolrag.client import PoolragClient, RemoteError, RemoteInvalidInputError

QUERY = "Which organelle produces energy in cells?"


@pytest.fixture(scope="module")
def minilm_url(minilm_engine: Engine) -> Iterator[str]:
    yield from serve(minilm_engine, "minilm", max_inputs=16)


@pytest.fixture(scope="module")
def keyed_url(minilm_engine: Engine) -> Iterator[str]:
    yield from serve(minilm_engine, "minilm", api_key=API_KEY)


@pytest.fixture(scope="module")
def cross_encoder_engine(assets: Path) -> Engine:
    return Engine(assets / "ms-marco-MiniLM-L-12-v2")


@pytest.fixture(scope="module")
def cross_encoder_url(cross_encoder_engine: Engine) -> Iterator[str]:
    yield from serve(cross_encoder_engine, "reranker")


@pytest.fixture
def client(minilm_url: str) -> Iterator[PoolragClient]:
    with PoolragClient(minilm_url, model="minilm") as client:
        yield client


# -- the engine's results ------------------------------------------------------------------------------
def test_embed_array_is_bit_identical_to_the_engine(client: PoolragClient, minilm_engine: Engine) -> None:
    for params in (None, PoolingParams(input_type="query"), PoolingParams(truncate_prompt_tokens=-1)):
        remote = client.embed_array(TEXTS, params)
        assert remote.dtype == np.float32 and remote.shape == (len(TEXTS), 384)
        np.testing.assert_array_equal(remote, minilm_engine.embed_array(TEXTS, params))
    np.testing.assert_array_equal(client.embed_array("one text"), minilm_engine.embed_array(["one text"]))


def test_token_id_prompts_are_sent_as_token_ids(client: PoolragClient, minilm_engine: Engine) -> None:
    prompt = {"prompt_token_ids": minilm_engine.tokenize("Paris is in France")}
    np.testing.assert_array_equal(client.embed_array([prompt]), minilm_engine.embed_array([prompt]))


def test_encode_arrays_returns_the_engines_per_token_matrices(
    client: PoolragClient, minilm_engine: Engine
) -> None:
    remote = client.encode_arrays(TEXTS[:3], "token_embed")
    local = [out.outputs.data for out in minilm_engine.encode(TEXTS[:3], "token_embed")]
    assert [m.shape for m in remote] == [m.shape for m in local]
    for r, m in zip(remote, local, strict=True):
        np.testing.assert_array_equal(r, m)


def test_score_array_equals_engine_score(client: PoolragClient, minilm_engine: Engine) -> None:
    local = [out.outputs.score for out in minilm_engine.score(QUERY, TEXTS)]
    np.testing.assert_allclose(client.score_array(QUERY, TEXTS), local, rtol=1e-6)
    pairs = [out.outputs.score for out in minilm_engine.score(TEXTS[:3], TEXTS[3:6])]
    np.testing.assert_allclose(client.score_array(TEXTS[:3], TEXTS[3:6]), pairs, rtol=1e-6)


def test_rerank_is_best_first_with_the_engines_scores(
    cross_encoder_url: str, cross_encoder_engine: Engine
) -> None:
    scores = np.asarray([out.outputs.score for out in cross_encoder_engine.score(QUERY, TEXTS)])
    with PoolragClient(cross_encoder_url) as client:
        ranked = client.rerank(QUERY, TEXTS, top_n=3)
        assert [i for i, _ in ranked] == list(np.argsort(-scores)[:3])
        np.testing.assert_allclose([s for _, s in ranked], np.sort(scores)[::-1][:3], rtol=1e-6)
        assert client.rerank(QUERY, []) == []


def test_async_methods_equal_sync(client: PoolragClient) -> None:
    async def run() -> tuple:
        results = (
            await client.aembed_array(TEXTS),
            await client.ascore_array(QUERY, TEXTS),
            await client.aencode_arrays(TEXTS[:2], "token_embed"),
        )
        await client.aclose()
        return results

    embedded, scores, matrices = asyncio.run(run())
    np.testing.assert_array_equal(embedded, client.embed_array(TEXTS))
    np.testing.assert_array_equal(scores, client.score_array(QUERY, TEXTS))
    for a, b in zip(matrices, client.encode_arrays(TEXTS[:2], "token_embed"), strict=True):
        np.testing.assert_array_equal(a, b)


def test_one_client_serves_several_event_loops(client: PoolragClient) -> None:
    first = asyncio.run(client.aembed_array(TEXTS[:2]))
    second = asyncio.run(client.aembed_array(TEXTS[:2]))  # the first loop is closed by now
    np.testing.assert_array_equal(first, second)


@pytest.mark.parametrize("per_request", [5, 16])
def test_long_lists_are_split_into_requests_and_kept_in_order(
    minilm_url: str, minilm_engine: Engine, per_request: int
) -> None:
    texts = [f"{i}: {TEXTS[i % len(TEXTS)]}" for i in range(40)]  # the server takes at most 16 per request
    client = PoolragClient(minilm_url, max_inputs_per_request=per_request, max_concurrency=3)
    np.testing.assert_allclose(client.embed_array(texts), minilm_engine.embed_array(texts), atol=1e-6)
    np.testing.assert_allclose(
        asyncio.run(client.aembed_array(texts)), minilm_engine.embed_array(texts), atol=1e-6
    )
    local = [out.outputs.score for out in minilm_engine.score(QUERY, texts)]
    np.testing.assert_allclose(client.score_array(QUERY, texts), local, atol=1e-6)


def test_empty_inputs_give_empty_results(client: PoolragClient) -> None:
    assert client.embed_array([]).shape == (0, 384)  # the engine's shape: the width is a fact
    assert client.encode_arrays([], "token_embed") == []
    assert client.score_array([], []).shape == (0,)


# -- errors ------------------------------------------------------------------------------------------------
def test_bad_input_rejected_by_the_server_is_a_value_error(client: PoolragClient) -> None:
    with pytest.raises(RemoteInvalidInputError, match="empty") as error:
        client.embed_array(["fine", ""])
    assert error.value.status_code == 400 and isinstance(error.value, ValueError)


def test_parameters_are_checked_against_the_served_facts_before_sending(
    client: PoolragClient, minilm_engine: Engine
) -> None:
    assert client.facts == minilm_engine.facts.renamed("minilm")
    with pytest.raises(DimensionsError, match="Matryoshka") as error:
        client.embed_array(["text"], PoolingParams(dimensions=7))
    assert not isinstance(error.value, RemoteInvalidInputError)  # refused here, not by the server
    with pytest.raises(UnsupportedTaskError):
        client.encode_arrays(["text"], "classify")
    with pytest.raises(InvalidInputError, match="unknown pooling task"):
        asyncio.run(client.aencode_arrays(["text"], "generate"))


def test_parameters_the_endpoint_would_ignore_are_refused_before_sending(client: PoolragClient) -> None:
    with pytest.raises(InvalidInputError, match="normalize"):
        client.embed_array(["text"], PoolingParams(normalize=False))
    with pytest.raises(InvalidInputError, match="prompt"):
        client.score_array("q", ["d"], PoolingParams(prompt="query: "))


def test_local_checks_match_the_engines(client: PoolragClient) -> None:
    with pytest.raises(InputTypeError):
        client.embed_array([42])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match="equal-length"):
        client.score_array(["a", "b"], ["c", "d", "e"])
    with pytest.raises(InvalidInputError, match="http"):
        PoolragClient("localhost:8000")


def test_api_key_is_sent_as_a_bearer_token(
    keyed_url: str, minilm_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    np.testing.assert_array_equal(
        PoolragClient(keyed_url, API_KEY).embed_array(["a"]), minilm_engine.embed_array(["a"])
    )
    monkeypatch.setenv("POOLRAG_API_KEY", API_KEY)
    assert PoolragClient(keyed_url).embed_array(["a"]).shape == (1, 384)  # taken from the environment
    with pytest.raises(RemoteError) as error:
        PoolragClient(keyed_url, "wrong-key").embed_array(["a"])
    assert error.value.status_code == 401 and not isinstance(error.value, ValueError)


def test_unknown_model_name_and_unreachable_server(minilm_url: str) -> None:
    with pytest.raises(InvalidInputError, match="not served here; use 'minilm'"):
        PoolragClient(minilm_url, model="other-model").embed_array(["a"])
    with pytest.raises(RemoteError, match="cannot reach"):
        PoolragClient("http://127.0.0.1:9", timeout=5).embed_array(["a"])


def test_base_url_may_end_in_v1(minilm_url: str, minilm_engine: Engine) -> None:
    client = PoolragClient(minilm_url + "/v1/")
    assert client.base_url == minilm_url
    np.testing.assert_array_equal(client.embed_array(["a"]), minilm_engine.embed_array(["a"]))
