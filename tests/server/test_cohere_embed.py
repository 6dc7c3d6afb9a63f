"""POST /v2/embed and /v1/embed: Cohere's embed API, called with the real ``cohere`` clients (v2 and
v1) and with httpx."""

from __future__ import annotations

import base64

import cohere
import httpx
import numpy as np
import pytest

from poolrag import PoolingParams
from poolrag.postprocess.vector_precision import quantize_vectors

from .conftest import Served

TEXTS = ["The cat sat on the mat.", "Paris is the capital of France.", "Qubits hold superpositions."]
LONG_TEXT = "retrieval " * 300  # 302 tokens with [CLS]/[SEP], over MiniLM's 256


def _client(server: Served) -> cohere.ClientV2:
    return cohere.ClientV2(base_url=server.url, api_key="unused", timeout=120)


def _offline(server: Served, texts: list[str], params: PoolingParams | None = None) -> np.ndarray:
    return np.stack([out.outputs.embedding for out in server.engine.embed(texts, params)])


def test_cohere_client_gets_every_type_equal_to_the_engine_side_function(minilm_server: Served) -> None:
    response = _client(minilm_server).embed(
        texts=TEXTS,
        model=minilm_server.model,
        input_type="search_document",
        embedding_types=["float", "int8", "uint8", "binary", "ubinary"],
    )
    offline = _offline(minilm_server, TEXTS, PoolingParams(input_type="document"))
    got = response.embeddings
    np.testing.assert_allclose(np.array(got.float_, dtype=np.float32), offline, rtol=0, atol=1e-6)
    for kind in ("int8", "uint8", "binary", "ubinary"):
        np.testing.assert_array_equal(np.array(getattr(got, kind)), quantize_vectors(offline, kind))
    assert len(got.binary[0]) == 384 // 8
    assert response.texts == TEXTS
    tokens = sum(out.num_tokens for out in minilm_server.engine.embed(TEXTS))
    assert response.meta.billed_units.input_tokens == tokens
    assert response.meta.api_version.version == "2"
    # scaled by the request's own texts, unlike Cohere's fixed scale: the answer says so (its SDK
    # sends 96 texts a request, and one call's requests would not share a scale)
    (warning,) = response.meta.warnings
    assert warning.startswith(f"int8/uint8 were scaled by this request's own {len(TEXTS)} texts")
    floats = _client(minilm_server).embed(
        texts=TEXTS, model=minilm_server.model, input_type="search_document", embedding_types=["float"]
    )
    assert floats.meta.warnings is None


def test_the_v1_client_gets_bare_floats_or_vectors_by_type(minilm_server: Served) -> None:
    """``cohere.Client`` (v1) posts to /v1/embed; langchain-cohere's CohereEmbeddings builds it and
    reads ``response.dict()["embeddings"][type]`` (seen from outside: a 404)."""
    client = cohere.Client(base_url=minilm_server.url, api_key="unused", timeout=120)
    offline = _offline(minilm_server, TEXTS, PoolingParams(input_type="query"))
    bare = client.embed(texts=TEXTS, model=minilm_server.model, input_type="search_query")
    assert bare.response_type == "embeddings_floats" and bare.texts == TEXTS
    np.testing.assert_allclose(np.array(bare.embeddings, dtype=np.float32), offline, rtol=0, atol=1e-6)
    typed = client.embed(
        texts=TEXTS, model=minilm_server.model, input_type="search_query", embedding_types=["float", "int8"]
    )
    assert typed.response_type == "embeddings_by_type"
    as_langchain_reads = typed.dict()["embeddings"]
    np.testing.assert_allclose(np.array(as_langchain_reads["float"]), offline, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(np.array(as_langchain_reads["int8"]), quantize_vectors(offline, "int8"))
    assert bare.meta.api_version.version == typed.meta.api_version.version == "1"  # as Cohere v1 says


def test_base64_is_each_float_vectors_little_endian_bytes_and_null_types_are_float(
    minilm_server: Served, http: httpx.Client
) -> None:
    response = _client(minilm_server).embed(
        texts=TEXTS,
        model=minilm_server.model,
        input_type="search_document",
        embedding_types=["float", "base64"],
    )
    floats = np.array(response.embeddings.float_, dtype=np.float32)
    decoded = np.stack(
        [np.frombuffer(base64.b64decode(item), dtype="<f4") for item in response.embeddings.base64]
    )
    np.testing.assert_array_equal(decoded, floats)
    plain = http.post(f"{minilm_server.url}/v2/embed", json={"texts": TEXTS, "embedding_types": None})
    assert plain.status_code == 200, plain.text
    np.testing.assert_array_equal(np.array(plain.json()["embeddings"]["float"], dtype=np.float32), floats)


def test_max_tokens_cuts_each_text_and_priority_zero_is_accepted(minilm_server: Served) -> None:
    response = _client(minilm_server).embed(
        texts=[LONG_TEXT, TEXTS[2]],
        model=minilm_server.model,
        input_type="search_document",
        embedding_types=["float"],
        max_tokens=8,
        priority=0,
    )
    offline = _offline(
        minilm_server, [LONG_TEXT, TEXTS[2]], PoolingParams(truncate_prompt_tokens=8, input_type="document")
    )
    np.testing.assert_allclose(np.array(response.embeddings.float_), offline, rtol=0, atol=1e-6)
    assert response.meta.billed_units.input_tokens == 16
    assert response.meta.warnings == ["2 of 2 texts were truncated to max_tokens (8)"]  # not the model's
    # max_tokens only cuts: over the model's 256 tokens it cuts there (vLLM's routes refuse that)
    longer = _client(minilm_server).embed(
        texts=[LONG_TEXT], model=minilm_server.model, input_type="search_document", max_tokens=10_000
    )
    whole = _offline(
        minilm_server, [LONG_TEXT], PoolingParams(truncate_prompt_tokens=-1, input_type="document")
    )
    np.testing.assert_allclose(np.array(longer.embeddings.float_), whole, rtol=0, atol=1e-6)
    assert longer.meta.warnings == ["1 of 1 texts were truncated to the model's maximum length"]


def test_search_query_uses_the_query_side_and_output_dimension_truncates(matryoshka_server: Served) -> None:
    response = _client(matryoshka_server).embed(
        texts=TEXTS[:2],
        model=matryoshka_server.model,
        input_type="search_query",
        embedding_types=["float"],
        output_dimension=128,
    )
    offline = _offline(matryoshka_server, TEXTS[:2], PoolingParams(input_type="query", dimensions=128))
    got = np.array(response.embeddings.float_, dtype=np.float32)
    assert got.shape == (2, 128)
    np.testing.assert_allclose(got, offline, rtol=0, atol=1e-6)


def test_int8_scaled_by_a_given_calibration_set(minilm_server: Served, http: httpx.Client) -> None:
    calibration = _offline(minilm_server, TEXTS)
    body = {
        "texts": ["A single text."],
        "input_type": "search_document",
        "embedding_types": ["int8"],
        "calibration": calibration.tolist(),
    }
    answer = http.post(f"{minilm_server.url}/v2/embed", json=body)
    assert answer.status_code == 200, answer.text
    offline = _offline(minilm_server, ["A single text."], PoolingParams(input_type="document"))
    expected = quantize_vectors(offline, "int8", calibration=calibration)
    np.testing.assert_array_equal(np.array(answer.json()["embeddings"]["int8"]), expected)
    assert answer.json()["meta"]["warnings"] is None  # a fixed scale: nothing to warn of


def test_truncate_end_keeps_the_first_tokens_and_none_refuses(
    minilm_server: Served, http: httpx.Client
) -> None:
    url = f"{minilm_server.url}/v2/embed"
    kept = http.post(url, json={"texts": [LONG_TEXT], "truncate": "END"})
    assert kept.status_code == 200, kept.text
    offline = _offline(
        minilm_server, [LONG_TEXT], PoolingParams(truncate_prompt_tokens=-1, input_type="document")
    )
    np.testing.assert_allclose(np.array(kept.json()["embeddings"]["float"]), offline, rtol=0, atol=1e-6)
    refused = http.post(url, json={"texts": ["short", LONG_TEXT], "truncate": "NONE"})
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]  # in Cohere's terms: its clients have no truncate_prompt_tokens
    assert error["param"] == "truncate" and "send truncate END" in error["message"]
    assert "truncate_prompt_tokens" not in error["message"]
    assert error["message"].startswith("texts[1] has 302 tokens")  # which of a batch: found by index


def test_max_tokens_under_truncate_none_refuses_only_a_longer_text(
    minilm_server: Served, http: httpx.Client
) -> None:
    """Cohere's SDK: "if the input text is longer than [max_tokens], it will be truncated according
    to the truncate parameter": under NONE a text that fits is embedded, a longer one refused."""
    url = f"{minilm_server.url}/v2/embed"
    fits = http.post(url, json={"texts": TEXTS, "truncate": "NONE", "max_tokens": 64})
    assert fits.status_code == 200, fits.text
    offline = _offline(minilm_server, TEXTS, PoolingParams(input_type="document"))
    np.testing.assert_allclose(np.array(fits.json()["embeddings"]["float"]), offline, rtol=0, atol=1e-6)
    over = http.post(url, json={"texts": ["cat", "retrieval " * 20], "truncate": "NONE", "max_tokens": 8})
    assert over.status_code == 400, over.text
    error = over.json()["error"]
    assert error["param"] == "max_tokens" and error["message"].startswith("texts[1] has 22 tokens")
    tiny = http.post(url, json={"texts": TEXTS, "max_tokens": 2}).json()["error"]
    assert tiny["param"] == "max_tokens" and "truncate_prompt_tokens" not in tiny["message"]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"texts": TEXTS, "embedding_types": ["int4"]}, "embedding_types"),
        ({"texts": TEXTS, "embedding_types": ["int8"], "calibration": [[0.1, 0.2]]}, "calibration"),
        ({"texts": ["one"], "embedding_types": ["uint8"]}, "calibration"),
        ({"texts": TEXTS, "embedding_types": ["int8"], "calibration": [[0.1], [0.1, 0.2]]}, "calibration"),
        ({"texts": TEXTS, "embedding_types": ["int8"], "calibration": [[1e300] * 384]}, "calibration"),
        ({"texts": TEXTS, "truncate": "START"}, "truncate"),
        ({"texts": ["retrieval " * 20], "truncate": "NONE", "max_tokens": 8}, "max_tokens"),
        ({"texts": TEXTS, "max_tokens": 2}, "max_tokens"),
        ({"texts": TEXTS, "priority": 1}, "priority"),
        ({"texts": []}, "texts"),
    ],
)
def test_bad_requests_are_4xx_naming_the_field(
    minilm_server: Served, http: httpx.Client, body: dict, param: str
) -> None:
    answer = http.post(f"{minilm_server.url}/v2/embed", json=body)
    assert 400 <= answer.status_code < 500, answer.text
    error = answer.json()["error"]
    assert param in (error["param"] or "") + error["message"]


@pytest.mark.parametrize(
    ("output_dimension", "said", "code"),
    [
        (1000, "output_dimension must be between 1 and 384, got 1000", "invalid_dimensions"),
        (200, "output_dimension must be one of [128, 256, 384], got 200", "invalid_dimensions"),
        (0, "output_dimension", "invalid_request"),  # the schema's, as /v1/embeddings answers 0
    ],
)
def test_an_output_dimension_the_model_cannot_give_names_cohere_s_field(
    matryoshka_server: Served, http: httpx.Client, output_dimension: int, said: str, code: str
) -> None:
    """Named in Cohere's field, with the code ``/v1/embeddings`` gives its ``dimensions`` (what
    ``PoolragClient`` maps to ``RemoteDimensionsError``)."""
    body = {"texts": ["hello"], "embedding_types": ["float"], "output_dimension": output_dimension}
    answer = http.post(f"{matryoshka_server.url}/v2/embed", json=body)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["param"] == "output_dimension" and said in error["message"], error
    assert error["code"] == code
    openai_way = {"input": ["hello"], "dimensions": output_dimension}
    assert (
        http.post(f"{matryoshka_server.url}/v1/embeddings", json=openai_way).json()["error"]["code"] == code
    )


@pytest.mark.parametrize(
    ("calibration", "said"),
    [
        ([[0.01 * i for i in range(384)]], "calibration is one vector"),
        ([[0.01 * i for i in range(384)]] * 3, "calibration is 3 equal vectors"),
    ],
)
@pytest.mark.parametrize("kind", ["int8", "uint8"])
def test_a_calibration_with_no_range_is_a_400_like_equal_texts(
    minilm_server: Served, http: httpx.Client, calibration: list, said: str, kind: str
) -> None:
    """Issue 47, item 6: one calibration vector (or one repeated) gives every dimension a zero range,
    so every value would be the lowest bucket; refused naming the field, as a batch of equal texts is."""
    url = f"{minilm_server.url}/v2/embed"
    body = {"texts": TEXTS[:2], "embedding_types": [kind], "calibration": calibration}
    answer = http.post(url, json=body)
    assert answer.status_code == 400, answer.text[:300]
    error = answer.json()["error"]
    assert error["param"] == "calibration" and said in error["message"]
    equal_texts = http.post(url, json={"texts": [TEXTS[0]] * 2, "embedding_types": [kind]})
    assert equal_texts.status_code == 400 and equal_texts.json()["error"]["param"] == "calibration"


@pytest.mark.parametrize("value", [1e300, -1e39])
def test_a_calibration_out_of_range_and_of_the_wrong_width_is_refused_for_its_value(
    minilm_server: Served, http: httpx.Client, value: float
) -> None:
    """A value float32 cannot hold is what is wrong first, whatever the width (2 here, the model's 384)."""
    body = {"texts": TEXTS, "embedding_types": ["int8"], "calibration": [[value, 0.5], [0.1, 0.2]]}
    answer = http.post(f"{minilm_server.url}/v2/embed", json=body)
    assert answer.status_code == 400, answer.text[:300]
    error = answer.json()["error"]
    assert error["param"] == "calibration" and "not a finite number" in error["message"]


PNG = (  # one pixel: refused before it is decoded
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def test_images_to_a_text_model_are_a_400_naming_their_field(
    minilm_server: Served, http: httpx.Client
) -> None:
    image_part = {"type": "image_url", "image_url": {"url": PNG}}
    for field, items in (
        ("images", [PNG]),
        ("inputs", [{"content": [{"type": "text", "text": "a cat"}]}, {"content": [image_part]}]),
    ):
        answer = http.post(f"{minilm_server.url}/v2/embed", json={field: items})
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert error["param"] == field and error["message"] == f"{field}: this model reads text only"


def test_a_reranker_refuses_embedding_types(cross_encoder_server: Served, http: httpx.Client) -> None:
    answer = http.post(
        f"{cross_encoder_server.url}/v2/embed", json={"texts": TEXTS, "embedding_types": ["float"]}
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == {
        "message": "embedding_types: model 'reranker' gives no embeddings "
        "(its tasks: classify, score, reward)",
        "type": "invalid_request_error",
        "param": "embedding_types",
        "code": "unsupported_task",  # a task the model cannot run, as on every other route
    }


def test_a_reranker_names_only_the_fields_a_request_sent(
    cross_encoder_server: Served, http: httpx.Client
) -> None:
    """The refusal named embedding_types to a request that never sent it (v1's default is floats):
    it names the model the request asked for, or, naming neither, no field."""
    url = f"{cross_encoder_server.url}/v1/embed"
    named = http.post(url, json={"texts": TEXTS, "model": cross_encoder_server.model})
    assert named.status_code == 400, named.text
    assert named.json()["error"]["param"] == "model"
    assert named.json()["message"] == (
        "model 'reranker' gives no embeddings (its tasks: classify, score, reward)"
    )
    bare = http.post(url, json={"texts": TEXTS})
    assert bare.status_code == 400, bare.text
    assert bare.json()["error"]["param"] is None and "embedding_types" not in bare.json()["message"]
    assert (
        bare.json()["message"] == "model 'reranker' gives no embeddings (its tasks: classify, score, reward)"
    )
    v1 = cohere.Client(base_url=cross_encoder_server.url, api_key="unused", timeout=60)
    with pytest.raises(cohere.BadRequestError) as refused:  # langchain-cohere's client: no embedding_types
        v1.embed(texts=TEXTS, model=cross_encoder_server.model, input_type="search_document")
    assert refused.value.body["message"] == named.json()["message"]  # type: ignore[index]


def test_the_cohere_client_reads_the_message_where_cohere_puts_it(minilm_server: Served) -> None:
    """Cohere answers errors as ``{"message", ...}``; its SDK raises by status with that body."""
    with pytest.raises(cohere.BadRequestError) as refused:
        _client(minilm_server).embed(
            texts=["hello", " "],
            model=minilm_server.model,
            input_type="search_query",
            embedding_types=["float"],
        )
    assert (
        refused.value.body["message"]
        == "texts[1] is empty (only whitespace, control or invisible format characters)"
    )
