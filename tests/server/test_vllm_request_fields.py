"""Every vLLM request field of the pooling endpoints is honoured, or refused with a 400 naming it.

Issue 30, item 4: "``"normalize": false`` on ``/v1/embeddings`` returns a unit vector with 200
(``extra="ignore"``); ``embed_dtype`` and other vLLM request fields likewise."
"""

from __future__ import annotations

import base64
import json
import string
import sys

import httpx
import numpy as np
import openai
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from poolrag import PoolingParams

from .conftest import Served

TEXTS = ["The cat sat on the mat.", "Paris is the capital of France."]
QUERY = "Where does the cat sit?"

# The request fields vLLM documents for its pooling endpoints (common, completion-style input,
# encoding, embed, classify and score parameters, and the chat-style input form), each with a value
# a vLLM client may send that is not the default.
VLLM_FIELDS: dict[str, object] = {
    "user": "user-1",
    "truncate_prompt_tokens": 8,
    "padding": "max_length",
    "truncation_side": "left",
    "request_id": "req-42",
    "priority": 1,
    "mm_processor_kwargs": {"num_crops": 4},
    "cache_salt": "salt-0123456789",
    "add_special_tokens": False,
    "encoding_format": "base64",
    "embed_dtype": "float16",
    "endianness": "big",
    "dimensions": 384,
    "normalize": False,
    "use_activation": False,
    "messages": [{"role": "user", "content": "hi"}],
    "add_generation_prompt": True,
    "continue_final_message": True,
    "chat_template": "{{ messages }}",
    "chat_template_kwargs": {"a": 1},
    "media_io_kwargs": {"image": {}},
}
BODIES = {
    "/v1/embeddings": {"input": TEXTS},
    "/pooling": {"input": TEXTS, "task": "embed"},
    "/score": {"text_1": QUERY, "text_2": TEXTS},
    "/rerank": {"query": QUERY, "documents": TEXTS},
    "/classify": {"input": TEXTS},
}
# the server each endpoint is asked on: one whose model runs it
SERVERS = {path: "classifier_server" if path == "/classify" else "minilm_server" for path in BODIES}


@pytest.fixture(scope="module")
def published(minilm_server: Served, http: httpx.Client) -> dict[str, set[str]]:
    """The fields each endpoint's published request schema declares."""
    spec = http.get(f"{minilm_server.url}/openapi.json").json()
    schemas = spec["components"]["schemas"]
    fields = {}
    for path in BODIES:
        ref = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        schema = schemas[ref.rsplit("/", 1)[1]]
        if "anyOf" in schema:  # a path speaking TEI's dialect beside vLLM's: vLLM's body is the first
            schema = schemas[schema["anyOf"][0]["$ref"].rsplit("/", 1)[1]]
        fields[path] = set(schema["properties"])
    return fields


@pytest.mark.parametrize("path", sorted(BODIES))
@pytest.mark.parametrize("field", sorted(VLLM_FIELDS))
def test_each_vllm_field_is_honoured_or_refused_by_name(
    request: pytest.FixtureRequest, http: httpx.Client, published: dict[str, set[str]], path: str, field: str
) -> None:
    """A 200 only for a field the endpoint's schema declares (and so applies); else a 400 naming it."""
    server: Served = request.getfixturevalue(SERVERS[path])
    response = http.post(f"{server.url}{path}", json={**BODIES[path], field: VLLM_FIELDS[field]})
    if response.status_code == 200:
        assert field in published[path], f"{path} answered 200 to {field} it does not declare"
    else:
        assert response.status_code == 400, response.text
        assert field in response.json()["error"]["message"], response.text


#: the defaults a dumped vLLM request model carries (``RerankRequest(...).model_dump()``)
VLLM_NULL_DEFAULTS = {
    "padding": None,
    "mm_processor_kwargs": None,
    "priority": 0,
    "truncation_side": None,
    "cache_salt": None,
    "user": None,
    "truncate_prompt_tokens": None,
}


@pytest.mark.parametrize("path", sorted(BODIES))
def test_a_dumped_vllm_request_with_its_null_defaults_is_answered(
    request: pytest.FixtureRequest, http: httpx.Client, path: str
) -> None:
    """A client that posts a whole vLLM request model sends every default; null asks for nothing."""
    server: Served = request.getfixturevalue(SERVERS[path])
    response = http.post(f"{server.url}{path}", json={**BODIES[path], **VLLM_NULL_DEFAULTS})
    assert response.status_code == 200, response.text
    for accepted in ({"padding": False}, {"padding": "do_not_pad"}):
        assert http.post(f"{server.url}{path}", json={**BODIES[path], **accepted}).status_code == 200


@pytest.mark.parametrize("path", sorted(BODIES))
def test_a_cut_over_the_models_length_is_vllms_400(
    request: pytest.FixtureRequest, http: httpx.Client, path: str
) -> None:
    """vLLM refuses ``truncate_prompt_tokens`` over ``max_model_len`` in these words on every pooling
    endpoint; the model's own length is a cut."""
    server: Served = request.getfixturevalue(SERVERS[path])
    longest = http.get(f"{server.url}/v1/models").json()["data"][0]["max_model_len"]
    assert http.post(
        f"{server.url}{path}", json={**BODIES[path], "truncate_prompt_tokens": longest}
    ).is_success
    response = http.post(f"{server.url}{path}", json={**BODIES[path], "truncate_prompt_tokens": longest + 1})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == "truncate_prompt_tokens"
    assert error["message"] == (
        f"truncate_prompt_tokens value ({longest + 1}) is greater than max_model_len ({longest}). "
        "Please, select a smaller truncation size."
    )


field_names = st.text(alphabet=string.ascii_lowercase + "_", min_size=1, max_size=24)


def test_any_undeclared_field_is_a_400_naming_it(
    minilm_server: Served, http: httpx.Client, published: dict[str, set[str]]
) -> None:
    @given(path=st.sampled_from(sorted(set(BODIES) - {"/classify"})), name=field_names)
    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def refused(path: str, name: str) -> None:
        if name in published[path] or name in BODIES[path]:
            return
        response = http.post(f"{minilm_server.url}{path}", json={**BODIES[path], name: 1})
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["param"] == name and name in error["message"]

    refused()


def _client(server: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)


def test_normalize_false_returns_the_unnormalised_vector(minilm_server: Served) -> None:
    response = _client(minilm_server).embeddings.create(
        model=minilm_server.model, input=TEXTS, encoding_format="float", extra_body={"normalize": False}
    )
    got = np.array([item.embedding for item in response.data], dtype=np.float32)
    raw = minilm_server.engine.embed_array(TEXTS, PoolingParams(normalize=False))
    np.testing.assert_allclose(got, raw, rtol=0, atol=1e-5)
    assert np.all(np.abs(np.linalg.norm(got, axis=1) - 1.0) > 1e-2)  # not unit vectors
    # vLLM's newer name for the same switch on embeddings
    newer = _client(minilm_server).embeddings.create(
        model=minilm_server.model, input=TEXTS, encoding_format="float", extra_body={"use_activation": False}
    )
    np.testing.assert_allclose([item.embedding for item in newer.data], raw, rtol=0, atol=1e-5)


def test_normalize_and_use_activation_must_agree(minilm_server: Served, http: httpx.Client) -> None:
    body = {"input": TEXTS, "normalize": True, "use_activation": False}
    response = http.post(f"{minilm_server.url}/v1/embeddings", json=body)
    assert response.status_code == 400 and response.json()["error"]["param"] == "use_activation"


@pytest.mark.parametrize(
    ("embed_dtype", "endianness", "wire", "tolerance"),
    [
        ("float32", "little", "<f4", 0.0),
        ("float32", "big", ">f4", 0.0),
        ("float16", "native", "<f2", 1e-3),
        ("float16", "big", ">f2", 1e-3),
        ("bfloat16", "little", "<u2", 8e-3),
    ],
)
def test_embed_dtype_and_endianness_on_the_wire(
    minilm_server: Served, http: httpx.Client, embed_dtype: str, endianness: str, wire: str, tolerance: float
) -> None:
    body = {"input": TEXTS, "encoding_format": "base64", "embed_dtype": embed_dtype, "endianness": endianness}
    response = http.post(f"{minilm_server.url}/v1/embeddings", json=body)
    assert response.status_code == 200, response.text
    expected = minilm_server.engine.embed_array(TEXTS)
    floats = http.post(
        f"{minilm_server.url}/v1/embeddings", json={"input": TEXTS, "embed_dtype": embed_dtype}
    ).json()
    for i, item in enumerate(response.json()["data"]):
        raw = np.frombuffer(base64.b64decode(item["embedding"]), dtype=wire)
        assert raw.shape == (384,)  # 2 bytes a value for the 16-bit types
        values = (raw.astype(np.uint32) << 16).view(np.float32) if embed_dtype == "bfloat16" else raw
        np.testing.assert_allclose(values.astype(np.float32), expected[i], rtol=0, atol=tolerance)
        # the float form ignores embed_dtype, as vLLM's: the vector as it is
        np.testing.assert_array_equal(np.asarray(floats["data"][i]["embedding"], np.float32), expected[i])


@pytest.mark.parametrize("embed_dtype", ["fp8_e4m3", "fp8_e5m2"])
def test_fp8_values_are_torchs_own_conversion(
    minilm_server: Served, http: httpx.Client, embed_dtype: str
) -> None:
    """vLLM's example loops over every embed_dtype, fp8 included, and decodes with torch: one byte a
    value, the value torch's fp8 type holds (the float form ignores embed_dtype, as vLLM's)."""
    url = f"{minilm_server.url}/v1/embeddings"
    torch_dtype = {"fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}[embed_dtype]
    expected = torch.from_numpy(minilm_server.engine.embed_array(TEXTS)).to(torch_dtype).to(torch.float32)
    b64 = http.post(url, json={"input": TEXTS, "encoding_format": "base64", "embed_dtype": embed_dtype})
    floats = http.post(url, json={"input": TEXTS, "embed_dtype": embed_dtype})
    assert b64.status_code == floats.status_code == 200, b64.text
    for i, (coded, listed) in enumerate(zip(b64.json()["data"], floats.json()["data"], strict=True)):
        raw = torch.frombuffer(bytearray(base64.b64decode(coded["embedding"])), dtype=torch.uint8)
        assert raw.shape == (384,)
        torch.testing.assert_close(raw.view(torch_dtype).to(torch.float32), expected[i], rtol=0, atol=0)
        full = torch.from_numpy(minilm_server.engine.embed_array(TEXTS)[i])
        torch.testing.assert_close(torch.tensor(listed["embedding"]), full, rtol=0, atol=0)


@pytest.mark.parametrize(
    ("task", "embed_dtype", "wire"), [("token_embed", "float32", "<f4"), ("embed", "float16", "<f2")]
)
def test_pooling_answers_base64_of_the_flattened_array(
    minilm_server: Served, http: httpx.Client, task: str, embed_dtype: str, wire: str
) -> None:
    """vLLM's /pooling ``encoding_format: base64``: the array's values row after row, in embed_dtype."""
    url = f"{minilm_server.url}/pooling"
    floats = http.post(url, json={"input": TEXTS, "task": task}).json()["data"]
    body = {"input": TEXTS, "task": task, "encoding_format": "base64", "embed_dtype": embed_dtype}
    coded = http.post(url, json=body)
    assert coded.status_code == 200, coded.text
    for item, listed in zip(coded.json()["data"], floats, strict=True):
        expected = np.asarray(listed["data"], np.float32)
        raw = np.frombuffer(base64.b64decode(item["data"]), dtype=wire).reshape(expected.shape)
        np.testing.assert_allclose(
            raw.astype(np.float32), expected, rtol=0, atol=1e-3 if wire == "<f2" else 0
        )


# How vLLM's example client decodes a bytes answer: each item's slice, viewed as its dtype (bfloat16's
# bits through a 16-bit view), swapped when the order is not the machine's.
_VIEWS = {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16}


def _decode_vllm_bytes(item: dict, body: bytes) -> np.ndarray:
    raw = np.frombuffer(body[item["start"] : item["end"]], dtype=_VIEWS[item["embed_dtype"]])
    if item["endianness"] not in ("native", sys.byteorder):
        raw = raw.byteswap()
    raw = raw.reshape(item["shape"])
    return (raw.astype(np.uint32) << 16).view(np.float32) if item["embed_dtype"] == "bfloat16" else raw


@pytest.mark.parametrize("embed_dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("endianness", ["little", "big"])
def test_vllms_bytes_answer_decodes_to_the_float_answer(
    minilm_server: Served, http: httpx.Client, embed_dtype: str, endianness: str
) -> None:
    url = f"{minilm_server.url}/v1/embeddings"
    floats = http.post(url, json={"input": TEXTS, "embed_dtype": embed_dtype}).json()["data"]
    body = {"input": TEXTS, "encoding_format": "bytes", "embed_dtype": embed_dtype, "endianness": endianness}
    answer = http.post(url, json=body)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/octet-stream"
    metadata = json.loads(answer.headers["metadata"])
    assert metadata["model"] == minilm_server.model and metadata["usage"]["prompt_tokens"] > 0
    items = sorted(metadata["data"], key=lambda item: item["index"])
    assert [item["shape"] for item in items] == [[384], [384]]
    assert items[-1]["end"] == len(answer.content) == 2 * 384 * (4 if embed_dtype == "float32" else 2)
    for item, expected in zip(items, floats, strict=True):
        got = _decode_vllm_bytes(item, answer.content)
        # the float answer is the full vector (embed_dtype shapes bytes only); the bytes hold it rounded
        rounded = torch.tensor(expected["embedding"], dtype=torch.float32).to(getattr(torch, embed_dtype))
        np.testing.assert_array_equal(got.astype(np.float32), rounded.to(torch.float32).numpy())
    only = http.post(url, json={**body, "encoding_format": "bytes_only"})
    assert only.status_code == 200 and "metadata" not in only.headers
    assert only.content == answer.content


@pytest.mark.parametrize("task", ["token_embed", "embed"])
def test_pooling_answers_vllms_bytes_too(minilm_server: Served, http: httpx.Client, task: str) -> None:
    """vLLM's /pooling takes encoding_format bytes / bytes_only (its pooling serving builds the same
    binary answer as /v1/embeddings): each array's values row after row, its shape in the metadata."""
    url = f"{minilm_server.url}/pooling"
    floats = [
        np.asarray(d["data"], np.float32)
        for d in http.post(url, json={"input": TEXTS, "task": task}).json()["data"]
    ]
    body = {
        "input": TEXTS,
        "task": task,
        "encoding_format": "bytes",
        "embed_dtype": "float16",
        "endianness": "big",
    }
    answer = http.post(url, json=body)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/octet-stream"
    assert answer.headers["X-Truncated-Inputs"] == "0"
    metadata = json.loads(answer.headers["metadata"])
    assert metadata["model"] == minilm_server.model and metadata["usage"]["prompt_tokens"] > 0
    items = sorted(metadata["data"], key=lambda item: item["index"])
    assert [item["shape"] for item in items] == [list(f.shape) for f in floats]
    for item, expected in zip(items, floats, strict=True):
        got = _decode_vllm_bytes(item, answer.content).reshape(item["shape"])
        np.testing.assert_array_equal(got, expected.astype(np.float16))
    only = http.post(url, json={**body, "encoding_format": "bytes_only"})
    assert only.status_code == 200 and "metadata" not in only.headers and only.content == answer.content


def test_late_chunks_come_as_bytes_too(minilm_server: Served, http: httpx.Client) -> None:
    document = "The cat sat on the mat. Paris is the capital of France."
    body = {"input": document, "late_chunking": {"spans": [[0, 23], [24, len(document)]]}}
    floats = http.post(f"{minilm_server.url}/v1/embeddings", json=body).json()["data"]
    answer = http.post(f"{minilm_server.url}/v1/embeddings", json={**body, "encoding_format": "bytes"})
    items = json.loads(answer.headers["metadata"])["data"]
    got = [_decode_vllm_bytes(item, answer.content) for item in items]
    np.testing.assert_array_equal(np.stack(got), np.asarray([f["embedding"] for f in floats], np.float32))


def test_request_id_names_the_answer(request: pytest.FixtureRequest, http: httpx.Client) -> None:
    for path, body in BODIES.items():
        server: Served = request.getfixturevalue(SERVERS[path])
        answer = http.post(f"{server.url}{path}", json={**body, "request_id": "trace-7"})
        assert answer.status_code == 200 and answer.json()["id"] == "trace-7", answer.text


def test_priority_zero_is_served_and_scheduling_by_priority_refused(
    minilm_server: Served, http: httpx.Client
) -> None:
    url = f"{minilm_server.url}/v1/embeddings"
    assert http.post(url, json={"input": TEXTS, "priority": 0}).status_code == 200
    refused = http.post(url, json={"input": TEXTS, "priority": -1})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "priority"


def test_score_use_activation_gives_the_cross_encoders_logits(
    cross_encoder_server: Served, minilm_server: Served, http: httpx.Client
) -> None:
    body = {"text_1": QUERY, "text_2": TEXTS, "use_activation": False}
    response = http.post(f"{cross_encoder_server.url}/score", json=body)
    assert response.status_code == 200, response.text
    logits = cross_encoder_server.engine.score_array(QUERY, TEXTS, PoolingParams(use_activation=False))
    np.testing.assert_allclose([d["score"] for d in response.json()["data"]], logits, rtol=1e-5, atol=1e-5)
    assert np.any((logits < 0) | (logits > 1))  # not probabilities
    ranked = http.post(
        f"{cross_encoder_server.url}/rerank",
        json={"query": QUERY, "documents": TEXTS, "use_activation": False},
    ).json()["results"]
    assert sorted(r["relevance_score"] for r in ranked) == pytest.approx(sorted(logits), abs=1e-5)
    # a cosine score has no activation to turn off: refused, not ignored
    cosine = http.post(f"{minilm_server.url}/score", json=body)
    assert cosine.status_code == 400 and cosine.json()["error"]["param"] == "use_activation"


@pytest.mark.parametrize(("first", "second"), [("queries", "documents"), ("data_1", "data_2")])
def test_vllms_other_names_of_the_score_sides(
    minilm_server: Served, http: httpx.Client, first: str, second: str
) -> None:
    url = f"{minilm_server.url}/score"
    named = http.post(url, json={first: QUERY, second: TEXTS})
    assert named.status_code == 200, named.text
    plain = http.post(url, json={"text_1": QUERY, "text_2": TEXTS}).json()
    assert [d["score"] for d in named.json()["data"]] == [d["score"] for d in plain["data"]]


@pytest.mark.parametrize("path", ["/pooling", "/v1/embeddings"])
def test_a_bytes_answer_counts_the_texts_cut(minilm_server: Served, http: httpx.Client, path: str) -> None:
    """A bytes answer is a Response the route builds itself; X-Truncated-Inputs still counts the
    texts cut to the model's length, as the JSON answer's header does."""
    long_text = "word " * 2000  # past MiniLM's 512 tokens: cut by default
    body = {"input": [long_text, TEXTS[0]], "encoding_format": "bytes"}
    if path == "/pooling":
        body["task"] = "embed"
    as_bytes = http.post(f"{minilm_server.url}{path}", json=body)
    as_json = http.post(f"{minilm_server.url}{path}", json={**body, "encoding_format": "float"})
    assert as_bytes.status_code == 200 and as_json.status_code == 200, (as_bytes.text, as_json.text)
    assert as_bytes.headers["content-type"] == "application/octet-stream"
    assert as_bytes.headers["X-Truncated-Inputs"] == as_json.headers["X-Truncated-Inputs"] == "1"
