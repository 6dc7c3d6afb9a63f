"""Every client mistake gets its status and an OpenAI-shaped error, never a 500 or FastAPI's 422."""

from __future__ import annotations

import logging

import httpx
import openai
import pytest

from .conftest import MINILM_MAX_INPUTS, Served, serve_in_thread

LONG_TEXT = "retrieval " * 300

# (path, JSON body, expected error code or None, fragment of the message, param)
MINILM_CASES = [
    ("/v1/embeddings", {"input": []}, "empty_input", "input must not be empty", "input"),
    ("/v1/embeddings", {"input": ""}, "empty_input", "input is empty", "input"),
    ("/v1/embeddings", {"input": ["fine", "   "]}, "empty_input", "input[1] is empty", "input"),
    (
        "/v1/embeddings",
        {"input": 123},
        "invalid_request",
        "input: must be a string, a list of strings",
        "input",
    ),
    ("/v1/embeddings", {"input": ["a", 1]}, "invalid_request", "input: must be a string", "input"),
    ("/v1/embeddings", {"input": [[101, 102], "text"]}, "invalid_request", "input: must be", "input"),
    ("/v1/embeddings", {}, "invalid_request", "input: Field required", "input"),
    ("/v1/embeddings", {"input": "x", "encoding_format": "int8"}, "invalid_request", "encoding_format", None),
    ("/v1/embeddings", {"input": "x", "dimensions": 0}, "invalid_request", "dimensions", "dimensions"),
    (
        "/v1/embeddings",
        {"input": "x", "truncate_prompt_tokens": 0},
        "invalid_value",
        "truncate_prompt_tokens",
        None,
    ),
    ("/v1/embeddings", {"input": [[]]}, "empty_input", "input[0] is empty (no token ids)", "input"),
    ("/v1/embeddings", {"input": [[101], []]}, "empty_input", "input[1] is empty (no token ids)", "input"),
    (
        "/v1/embeddings",
        {"input": "hello world foo bar", "truncate_prompt_tokens": 1},
        "invalid_value",
        "truncate_prompt_tokens=1 leaves no room for text: this model adds 2 special tokens",
        "truncate_prompt_tokens",
    ),
    (
        "/score",
        {"text_1": "what is it", "text_2": "short doc here", "truncate_prompt_tokens": 2},
        "invalid_value",
        "so it must be at least 3",
        "truncate_prompt_tokens",
    ),
    (
        "/pooling",
        {"input": "x", "task": "embed", "normalize": False, "use_activation": True},
        "invalid_value",
        "normalize and use_activation disagree",
        "use_activation",
    ),
    ("/v1/embeddings", {"input": [99999999]}, "invalid_value", "token ids must be in [0, 30522)", "input"),
    ("/v1/embeddings", {"input": [-1, 5]}, "invalid_value", "token ids must be in", "input"),
    (
        "/v1/embeddings",
        {"input": LONG_TEXT, "truncate": False},
        "context_length_exceeded",
        "more than the model's maximum",
        "input",
    ),
    (
        "/v1/embeddings",
        {"input": ["x"] * (MINILM_MAX_INPUTS + 1)},
        "too_many_inputs",
        f"input has {MINILM_MAX_INPUTS + 1} items, more than this server's limit of {MINILM_MAX_INPUTS}",
        "input",
    ),
    (  # each span is one vector in the answer: a short body must not buy more vectors than inputs
        "/v1/embeddings",
        {"input": "a b c", "late_chunking": {"spans": [[0, 1]] * (MINILM_MAX_INPUTS + 1)}},
        "too_many_inputs",
        f"late_chunking.spans has {MINILM_MAX_INPUTS + 1} items, more than this server's limit",
        "late_chunking.spans",
    ),
    ("/classify", {"input": "x"}, "unsupported_task", "task 'classify' is not supported", None),
    (
        "/pooling",
        {"input": "x", "task": "reward"},
        "unsupported_task",
        "task 'reward' is not supported",
        None,
    ),
    ("/pooling", {"input": "x", "task": "generate"}, "invalid_request", "task", "task"),
    (
        "/score",
        {"text_1": ["a", "b"], "text_2": ["c", "d", "e"]},
        "invalid_value",
        "equal-length lists",
        None,
    ),
    ("/score", {"text_1": [], "text_2": ["c"]}, "empty_input", "text_1 must not be empty", "text_1"),
    (
        "/score",
        {"text_1": "a", "text_2": "b", "use_activation": False},
        "invalid_value",
        "use_activation applies to cross-encoder scores; this model scores by cosine",
        "use_activation",
    ),
    ("/v1/score", {"text_1": "a"}, "invalid_request", "text_2: Field required", "text_2"),
    ("/rerank", {"documents": ["a"]}, "invalid_request", "query: Field required", "query"),
    ("/rerank", {"query": "q", "documents": []}, "empty_input", "documents must not be empty", "documents"),
    ("/v1/rerank", {"query": "q", "documents": ["a"], "top_n": -1}, "invalid_request", "top_n", "top_n"),
    ("/v2/rerank", {"query": "q", "documents": [{"title": "no text"}]}, "invalid_request", "documents", None),
    ("/v1/rerank", {"query": "", "documents": ["a"]}, "empty_input", "query is empty", "query"),
    ("/rerank", {"query": "q", "documents": ["a", " "]}, "empty_input", "documents[1] is empty", "documents"),
    ("/tokenize", {"prompt": " "}, "empty_input", "prompt is empty", "prompt"),
    ("/tokenize", {"prompt": ["a"]}, "invalid_request", "prompt", "prompt"),
    # Jina's boolean form reads a list of texts (the message once named the schema's class)
    (
        "/v1/embeddings",
        {"input": "x", "late_chunking": True},
        "invalid_request",
        "late_chunking true reads the texts of input, a list of strings, as one text",
        None,
    ),
]


def _assert_openai_error(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "detail", "message"}
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str) and error["message"]
    assert body["detail"] == error["message"]  # where Jina's clients read it (they raised KeyError)
    assert body["message"] == error["message"]  # where Cohere's read it
    return error


@pytest.mark.parametrize(("path", "body", "code", "message", "param"), MINILM_CASES)
def test_bad_requests_get_400_with_a_clear_message(
    minilm_server: Served,
    http: httpx.Client,
    path: str,
    body: dict,
    code: str,
    message: str,
    param: str | None,
) -> None:
    error = _assert_openai_error(http.post(f"{minilm_server.url}{path}", json=body), 400)
    assert error["type"] == "invalid_request_error"
    assert error["code"] == code
    assert message in error["message"]
    if param is not None:
        assert error["param"] == param


def test_a_whole_request_rule_and_a_union_field_read_as_one_plain_sentence(
    minilm_server: Served, http: httpx.Client
) -> None:
    """Pydantic's framing is not the client's business: a rule over the whole body said "request
    body: Value error, send input or messages ...", and content sent as a list of parts with a bad
    part was told first that it "should be a valid string"."""
    url = f"{minilm_server.url}/v1/embeddings"
    message = [{"role": "user", "content": "a"}]
    error = _assert_openai_error(http.post(url, json={"input": "a", "messages": message}), 400)
    assert error["message"] == "send input or messages (one of the two)"
    bad_part = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "data:,"}]}]}
    error = _assert_openai_error(http.post(url, json=bad_part), 400)
    assert "valid string" not in error["message"] and "must be a JSON object" in error["message"]


# the same mistake, a text with nothing to read, named the same way on every route
EMPTY_TEXT_CASES = [
    (
        "minilm_server",
        "/score",
        {"text_1": "q", "text_2": ["a", "b", "c", " "]},
        "text_2[3] is empty",
        "text_2",
    ),
    ("minilm_server", "/v1/score", {"text_1": "", "text_2": "a"}, "text_1 is empty", "text_1"),
    ("minilm_server", "/score", {"queries": ["q", "\u200b"], "documents": ["a", "b"]}, "text_1[1]", "text_1"),
    (
        "minilm_server",
        "/rerank",
        {"query": "q", "documents": ["a", " "]},
        "documents[1] is empty",
        "documents",
    ),
    ("minilm_server", "/rerank", {"query": "\n", "documents": ["a"]}, "query is empty", "query"),
    ("minilm_server", "/v1/embeddings", {"input": ["a", "\x00"]}, "input[1] is empty", "input"),
    ("minilm_server", "/pooling", {"input": ["a", ""], "task": "token_embed"}, "input[1] is empty", "input"),
    ("minilm_server", "/v2/embed", {"texts": ["a", " "]}, "texts[1] is empty", "texts"),
    ("minilm_server", "/v2/embed", {"texts": []}, "texts must not be empty", "texts"),
    ("minilm_server", "/tokenize", {"prompt": ""}, "prompt is empty", "prompt"),
    ("classifier_server", "/classify", {"input": ["a", " "]}, "input[1] is empty", "input"),
]


@pytest.mark.parametrize(("server", "path", "body", "message", "param"), EMPTY_TEXT_CASES)
def test_empty_text_is_empty_input_naming_the_field_and_index(
    request: pytest.FixtureRequest,
    http: httpx.Client,
    server: str,
    path: str,
    body: dict,
    message: str,
    param: str,
) -> None:
    served: Served = request.getfixturevalue(server)
    error = _assert_openai_error(http.post(f"{served.url}{path}", json=body), 400)
    assert (error["code"], error["param"]) == ("empty_input", param)
    assert error["message"].startswith(message)


def test_a_number_with_too_many_digits_is_a_plain_400(minilm_server: Served, http: httpx.Client) -> None:
    """Python refuses to read an integer of over 4300 digits; its message names sys internals."""
    content = b'{"input": "x", "dimensions": ' + b"9" * 5000 + b"}"
    response = http.post(
        f"{minilm_server.url}/v1/embeddings", content=content, headers={"content-type": "application/json"}
    )
    error = _assert_openai_error(response, 400)
    assert error["message"] == "a number in the request body has too many digits"
    assert error["code"] == "invalid_request"


def test_an_unknown_model_is_404_naming_the_served_ones(minilm_server: Served, http: httpx.Client) -> None:
    body = {"model": "gpt-4", "input": "x"}
    error = _assert_openai_error(http.post(f"{minilm_server.url}/v1/embeddings", json=body), 404)
    assert error["code"] == "model_not_found" and error["param"] == "model"
    assert "model 'gpt-4' is not served here; use 'all-MiniLM-L6-v2', 'minilm'" in error["message"]


LONG_NAME = "m" * 1_000_000
QUOTED = "'" + "m" * 100 + "'... (1000000 characters)"
CUT = "m" * 100 + "... (1000000 characters)"


@pytest.mark.parametrize(
    ("path", "body", "status", "param", "quoted"),
    [
        ("/v1/embeddings", {"model": LONG_NAME, "input": "x"}, 404, "model", QUOTED),
        ("/v1/embeddings", {LONG_NAME: 1, "input": "x"}, 400, CUT, f"{CUT}: not a field"),
    ],
)
def test_a_long_name_the_client_sent_is_quoted_cut_short(
    minilm_server: Served, http: httpx.Client, path: str, body: dict, status: int, param: str, quoted: str
) -> None:
    """An unknown model or field name is quoted in the answer, cut to 100 characters with its
    length: a 1 MB name came back in full three or four times (message, detail, message, param)."""
    response = http.post(f"{minilm_server.url}{path}", json=body)
    error = _assert_openai_error(response, status)
    assert error["param"] == param
    assert quoted in error["message"]
    assert len(response.content) < 2000


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b'{"input": "x"', "not valid JSON"),
        (b"[1, 2]", "request body: must be a JSON object"),
        (b"null", "request body: must be a JSON object"),
    ],
)
def test_malformed_bodies_get_400(
    minilm_server: Served, http: httpx.Client, content: bytes, fragment: str
) -> None:
    response = http.post(
        f"{minilm_server.url}/v1/embeddings", content=content, headers={"content-type": "application/json"}
    )
    assert fragment in _assert_openai_error(response, 400)["message"]


def test_wrong_task_for_the_model_is_400(
    cross_encoder_server: Served, classifier_server: Served, http: httpx.Client
) -> None:
    embed = http.post(f"{cross_encoder_server.url}/v1/embeddings", json={"input": "x"})
    assert "task 'embed' is not supported" in _assert_openai_error(embed, 400)["message"]
    rerank = http.post(f"{classifier_server.url}/rerank", json={"query": "q", "documents": ["a"]})
    assert _assert_openai_error(rerank, 400)["code"] == "unsupported_task"


def test_unknown_paths_and_methods_are_openai_shaped(minilm_server: Served, http: httpx.Client) -> None:
    missing = _assert_openai_error(http.get(f"{minilm_server.url}/v1/chat/completions"), 404)
    assert missing["type"] == "invalid_request_error"  # as OpenAI types an unknown URL
    wrong_method = _assert_openai_error(http.get(f"{minilm_server.url}/v1/embeddings"), 405)
    assert wrong_method["message"] == "Method Not Allowed"


def test_openai_client_raises_not_found_for_an_unknown_model(minilm_server: Served) -> None:
    client = openai.OpenAI(base_url=f"{minilm_server.url}/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.NotFoundError) as caught:
        client.embeddings.create(model="text-embedding-3-small", input="x")
    assert "is not served here" in caught.value.message
    assert caught.value.code == "model_not_found"
    assert caught.value.type == "invalid_request_error"  # OpenAI's own type for an unknown model


def test_a_closed_engine_is_503_not_a_model_failure() -> None:
    """A request that meets an engine already closed (the server shutting down) can be retried
    elsewhere: 503, as a full queue is, not the 500 of a model that failed."""
    from poolrag import EngineClosedError
    from poolrag.server.errors import from_poolrag_error

    answer = from_poolrag_error(EngineClosedError("the engine is closed (Engine.close(), ...)"))
    assert (answer.status_code, answer.code) == (503, "engine_closed")
    assert answer.headers == {"Retry-After": "1"}  # as a full queue's 503: clients that retry wait
    assert answer.message.startswith("the server is shutting down") and "Engine.close" not in answer.message


def test_a_refusals_reason_is_logged_at_debug(minilm_engine, caplog) -> None:
    """The access line says only "400 Bad Request"; even --log-level debug never said why."""
    with (
        serve_in_thread(minilm_engine) as url,
        caplog.at_level(logging.DEBUG, logger="poolrag.server.errors"),
    ):
        httpx.post(f"{url}/v1/embeddings", json={"input": "x", "dimensions": 3}, timeout=30)
        httpx.post(f"{url}/embed", json={"inputs": ""}, timeout=30)
    assert (
        "POST /v1/embeddings answered 400 invalid_dimensions: this model is not a Matryoshka" in caplog.text
    )
    assert "POST /embed answered 4" in caplog.text
