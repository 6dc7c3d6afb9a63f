"""The official ``openai`` npm package (LangChain.js's ``OpenAIEmbeddings`` calls through it)
against ``poolrag serve``: ``client.embeddings.create`` with the SDK's defaults asks for base64 and
decodes it to float32 itself; vectors equal the engine's, and the server's errors are the SDK's
``NotFoundError`` and ``BadRequestError``. (The Vercel AI SDK's OpenAI provider posts with its own
fetch and asks for ``"float"``, the answer tests/server/test_embeddings.py checks.) The package's version is
pinned in clients/package-lock.json (the newest that runs on Node 20; 7.x needs Node 22)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from poolrag import PoolingParams

from .conftest import Served
from .foreign_clients import npm_package_version, program, run_client

TEXTS = ["A cat sat on the mat.", "Stock markets fell sharply on Monday.", "Le café ferme à midi."]


@pytest.fixture(scope="module")
def results(minilm_server: Served, matryoshka_server: Served) -> list[dict[str, Any]]:
    """openai_embeddings.mjs's results, in order: the texts, the texts at 128 dimensions on a
    Matryoshka model, an unknown model, an empty input."""
    node = program("node", "nodejs npm")
    npm_package_version("openai")
    calls = [
        (minilm_server, {"model": minilm_server.model, "input": TEXTS}),
        (matryoshka_server, {"model": matryoshka_server.model, "input": TEXTS, "dimensions": 128}),
        (minilm_server, {"model": "gpt-4", "input": TEXTS[0]}),
        (minilm_server, {"model": minilm_server.model, "input": ["fine", ""]}),
    ]
    plan = [{"baseURL": f"{server.url}/v1", "params": params} for server, params in calls]
    return run_client([node, "openai_embeddings.mjs"], json.dumps(plan))


def _vectors(result: dict[str, Any]) -> np.ndarray:
    assert "answer" in result, result
    assert [row["index"] for row in result["answer"]["data"]] == list(range(len(TEXTS)))
    return np.array([row["embedding"] for row in result["answer"]["data"]], dtype=np.float32)


def test_the_sdks_default_base64_decodes_to_the_engines_vectors(
    results: list[dict[str, Any]], minilm_server: Served
) -> None:
    assert results[0]["sent"] == [{"model": minilm_server.model, "input": TEXTS, "encoding_format": "base64"}]
    expected = minilm_server.engine.embed_array(TEXTS)
    np.testing.assert_allclose(_vectors(results[0]), expected, rtol=0, atol=1e-6)
    tokens = sum(out.num_tokens for out in minilm_server.engine.embed(TEXTS))
    assert results[0]["answer"]["usage"] == {"prompt_tokens": tokens, "total_tokens": tokens}
    assert results[0]["answer"]["model"] == minilm_server.model


def test_dimensions_give_the_engines_matryoshka_vectors(
    results: list[dict[str, Any]], matryoshka_server: Served
) -> None:
    assert results[1]["sent"][0]["dimensions"] == 128
    expected = matryoshka_server.engine.embed_array(TEXTS, PoolingParams(dimensions=128))
    assert expected.shape == (len(TEXTS), 128)
    np.testing.assert_allclose(_vectors(results[1]), expected, rtol=0, atol=1e-6)


def test_an_unknown_model_is_the_sdks_not_found_error(results: list[dict[str, Any]]) -> None:
    error = results[2]["error"]
    assert (error["class"], error["status"]) == ("NotFoundError", 404)
    assert (error["body"]["code"], error["body"]["param"]) == ("model_not_found", "model")
    assert error["body"]["message"].startswith("model 'gpt-4' is not served here")


def test_an_empty_input_is_the_sdks_bad_request_error(results: list[dict[str, Any]]) -> None:
    error = results[3]["error"]
    assert (error["class"], error["status"]) == ("BadRequestError", 400)
    assert error["body"] == {
        "message": "input[1] is empty",
        "type": "invalid_request_error",
        "param": "input",
        "code": "empty_input",
    }
