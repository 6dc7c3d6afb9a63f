"""Float-list answers (/v1/embeddings, TEI's /embed) written by orjson: the engine's float32 values."""

from __future__ import annotations

import base64
import json

import httpx
import numpy as np
import openai
import pytest

from poolrag.server import float_json
from poolrag.server.routes.embeddings import embedding_answer
from poolrag.server.schemas import EmbeddingData, EmbeddingResponse, Usage

from .conftest import Served

TEXTS = ["The cat sat on the mat.", "Paris is the capital of France.", "Qubits hold superpositions."]


def _vectors(count: int = 8, width: int = 384, extremes: bool = True) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    rows = rng.standard_normal((count, width)).astype(np.float32)
    if extremes:  # zero, negative zero, the smallest subnormal and the largest float32
        rows[0, :4] = [0.0, -0.0, 1e-45, 3.4028235e38]
    return list(rows)


def _pydantic_answer(vectors: list[np.ndarray], usage: Usage) -> bytes:
    """The answer as the server wrote it before it had its own encoder."""
    data = [EmbeddingData(index=i, embedding=v.astype(np.float32).tolist()) for i, v in enumerate(vectors)]
    return (
        EmbeddingResponse(id="embd-1", created=5, model="m", data=data, usage=usage)
        .model_dump_json()
        .encode()
    )


def test_the_answer_reads_back_as_the_float32_values_exactly() -> None:
    vectors = _vectors()
    answer = json.loads(
        embedding_answer("embd-1", 5, "m", vectors, Usage(prompt_tokens=3, total_tokens=3)).encode()
    )
    got = np.array([item["embedding"] for item in answer["data"]], dtype=np.float64)
    np.testing.assert_array_equal(got, np.stack(vectors).astype(np.float64))
    assert [item["index"] for item in answer["data"]] == list(range(len(vectors)))


def test_the_answer_is_the_pydantic_answers_bytes() -> None:
    vectors, usage = _vectors(), Usage(prompt_tokens=11, total_tokens=11)
    new = embedding_answer("embd-1", 5, "m", vectors, usage).encode()
    assert new == _pydantic_answer(vectors, usage)
    EmbeddingResponse.model_validate_json(new)  # the documented schema


@pytest.mark.parametrize("embed_dtype", ["float16", "bfloat16", "fp8_e4m3"])
def test_float_answers_ignore_embed_dtype_as_vllms_do(embed_dtype: str) -> None:
    """vLLM's float path lists the vectors as they are (``embed_dtype`` shapes base64 and bytes
    only); the floats came rounded to ``embed_dtype``."""
    vectors, usage = _vectors(extremes=False), Usage(prompt_tokens=1, total_tokens=1)
    floats = json.loads(
        embedding_answer("a", 1, "m", vectors, usage, ("float", embed_dtype, "little")).encode()
    )
    for listed, vector in zip(floats["data"], vectors, strict=True):
        np.testing.assert_array_equal(np.array(listed["embedding"], np.float32), vector)


def test_rows_are_widened_to_float64_as_they_are_written_not_copied_first() -> None:
    """orjson writes float32 as float32's shortest decimals (``0.1``, read back as another float), so
    each row is widened to float64, one at a time: a per-token answer never holds a float64 copy of
    all its values beside its JSON."""
    vectors, usage = _vectors(), Usage(prompt_tokens=1, total_tokens=1)
    answer = embedding_answer("embd-1", 5, "m", vectors, usage)
    rows = [item["embedding"] for item in answer.content["data"]]
    assert all(row.values is vector for row, vector in zip(rows, vectors, strict=True))
    assert answer.encode() == _pydantic_answer(vectors, usage)


def test_without_orjson_pydantic_writes_the_same_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    vectors, usage = _vectors(), Usage(prompt_tokens=2, total_tokens=2)
    with_orjson = embedding_answer("embd-1", 5, "m", vectors, usage).encode()
    monkeypatch.setattr(float_json, "orjson", None)
    assert (
        embedding_answer("embd-1", 5, "m", vectors, usage).encode()
        == with_orjson
        == _pydantic_answer(vectors, usage)
    )


def test_served_floats_are_the_served_float32_bytes(minilm_server: Served, http: httpx.Client) -> None:
    url = f"{minilm_server.url}/v1/embeddings"
    floats = http.post(url, json={"input": TEXTS, "encoding_format": "float"})
    encoded = http.post(url, json={"input": TEXTS, "encoding_format": "base64"}).json()
    assert floats.headers["content-type"] == "application/json"
    for as_float, as_b64 in zip(floats.json()["data"], encoded["data"], strict=True):
        exact = np.frombuffer(base64.b64decode(as_b64["embedding"]), dtype="<f4").astype(np.float64)
        np.testing.assert_array_equal(np.array(as_float["embedding"], dtype=np.float64), exact)


def test_the_openai_client_parses_the_float_answer(minilm_server: Served, http: httpx.Client) -> None:
    client = openai.OpenAI(base_url=f"{minilm_server.url}/v1", api_key="unused", max_retries=0)
    parsed = client.embeddings.create(model=minilm_server.model, input=TEXTS, encoding_format="float")
    raw = http.post(
        f"{minilm_server.url}/v1/embeddings", json={"input": TEXTS, "encoding_format": "float"}
    ).json()
    assert [item.embedding for item in parsed.data] == [item["embedding"] for item in raw["data"]]
    assert parsed.usage.total_tokens == raw["usage"]["total_tokens"]


def test_tei_embed_answers_the_same_floats(minilm_server: Served, http: httpx.Client) -> None:
    """TEI's ``/embed`` (a bare list of float lists, written by the same encoder) gives the very
    floats of ``/v1/embeddings``."""
    tei = http.post(f"{minilm_server.url}/embed", json={"inputs": TEXTS})
    openai_shaped = http.post(f"{minilm_server.url}/v1/embeddings", json={"input": TEXTS}).json()
    assert tei.status_code == 200 and tei.headers["content-type"] == "application/json"
    assert tei.json() == [item["embedding"] for item in openai_shaped["data"]]
