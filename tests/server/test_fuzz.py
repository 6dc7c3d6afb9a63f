"""Property-based fuzzing of request bodies: whatever a client sends, the answer is never a 5xx,
and every error is in OpenAI's shape.

schemathesis (test_openapi.py) explores bodies shaped by the schema; this explores what a schema
cannot describe: lone surrogates smuggled in as JSON escapes, huge or negative token ids, mixed
lists, wrong types under the real field names, and raw bytes.
"""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import Served

# a lone surrogate between ordinary text (hypothesis drops surrogates from merged alphabets)
with_surrogate = st.builds(
    lambda head, surrogate, tail: head + surrogate + tail,
    st.text(max_size=8),
    st.characters(categories=["Cs"]),
    st.text(max_size=8),
)
texts = st.text(max_size=24) | with_surrogate
words = st.text(min_size=1, max_size=24) | with_surrogate
token_ids = st.lists(
    st.integers(min_value=-3, max_value=40000) | st.integers(min_value=-(2**70), max_value=2**70), max_size=6
)
numbers = (
    st.integers(min_value=-3, max_value=600) | st.integers(min_value=-(2**70), max_value=2**70) | st.floats()
)
anything = st.recursive(
    st.none() | st.booleans() | numbers | texts,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=3),
    max_leaves=12,
)
inputs = (
    words | st.lists(words, min_size=1, max_size=4) | token_ids | st.lists(token_ids, max_size=3) | anything
)
# Deep requests: sensible options, so the fuzzed inputs get past validation to the tokenizer and model.
sensible = {
    "truncate_prompt_tokens": st.sampled_from([-1, 1, 3, 512]),
    "encoding_format": st.sampled_from(["float", "base64"]),
    "input_type": st.sampled_from(["query", "document"]),
    "task": st.sampled_from(["embed", "token_embed", "classify", "reward", "token_classify"]),
    "top_n": st.integers(min_value=0, max_value=6),
    "return_documents": st.booleans(),
    "use_activation": st.booleans(),
    "normalize": st.booleans(),
    "add_special_tokens": st.booleans(),
    "return_token_strs": st.booleans(),
}
# Wide requests: any value under any field name.
junk = {
    name: anything
    for name in [
        *sensible,
        "model",
        "dimensions",
        "user",
        "input",
        "text_1",
        "text_2",
        "query",
        "documents",
        "prompt",
    ]
}
documents = st.lists(words | st.fixed_dictionaries({"text": words}), min_size=1, max_size=4)
REQUIRED = {
    "/v1/embeddings": {"input": inputs},
    "/classify": {"input": inputs},
    "/pooling": {"input": inputs},
    "/score": {"text_1": inputs, "text_2": inputs},
    "/v1/rerank": {"query": words, "documents": documents},
    "/tokenize": {"prompt": words},
}


def _bodies(path: str) -> st.SearchStrategy[object]:
    deep = st.fixed_dictionaries(REQUIRED[path], optional=sensible)
    wide = st.fixed_dictionaries({}, optional=junk)
    return st.one_of(deep, deep, deep, wide, anything)  # mostly deep: the model path is where bugs hide


requests = st.sampled_from(sorted(REQUIRED)).flatmap(lambda path: st.tuples(st.just(path), _bodies(path)))


def _check(response: httpx.Response) -> None:
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"} and error["message"]


@pytest.fixture(params=["minilm_server", "cross_encoder_server", "colbert_server"])
def target(request: pytest.FixtureRequest) -> Served:
    return request.getfixturevalue(request.param)


def test_json_bodies_never_cause_a_server_error(target: Served, http: httpx.Client) -> None:
    @given(request=requests)
    @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def never_5xx(request: tuple[str, object]) -> None:
        path, body = request
        content = json.dumps(body).encode()  # ASCII escapes, so lone surrogates reach the server
        _check(
            http.post(f"{target.url}{path}", content=content, headers={"content-type": "application/json"})
        )

    never_5xx()


def test_raw_bytes_never_cause_a_server_error(minilm_server: Served, http: httpx.Client) -> None:
    @given(path=st.sampled_from(sorted(REQUIRED)), content=st.binary(max_size=200))
    @settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def never_5xx(path: str, content: bytes) -> None:
        _check(
            http.post(
                f"{minilm_server.url}{path}", content=content, headers={"content-type": "application/json"}
            )
        )

    never_5xx()


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/embeddings", b'{"input": "ab\\ud800c"}'),
        ("/v1/embeddings", b'{"input": ["ok", "\\udfff"]}'),
        ("/score", b'{"text_1": "q", "text_2": ["\\ud83d"]}'),
        ("/v1/rerank", b'{"query": "\\ud800", "documents": ["a"]}'),
        ("/tokenize", b'{"prompt": "\\ud800"}'),
    ],
)
def test_lone_surrogates_are_a_400(minilm_server: Served, http: httpx.Client, path: str, body: bytes) -> None:
    """Found by the fuzzer: the tokenizer cannot encode them, so they are refused up front."""
    response = http.post(
        f"{minilm_server.url}{path}", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert "not valid Unicode (lone surrogate" in response.json()["error"]["message"]
