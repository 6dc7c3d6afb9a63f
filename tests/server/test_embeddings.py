"""POST /v1/embeddings: OpenAI's embeddings API on the CLI-started MiniLM server."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest

from poolrag import Engine, PoolingParams

from .conftest import MINILM_NAMES, Served

TEXTS = ["The cat sat on the mat.", "Paris is the capital of France.", "Qubits hold superpositions."]
LONG_TEXT = "retrieval " * 300  # 302 tokens with [CLS]/[SEP], over MiniLM's 256


def _client(server: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)


def _offline(server: Served, inputs: list, params: PoolingParams | None = None) -> np.ndarray:
    return np.stack([out.outputs.embedding for out in server.engine.embed(inputs, params)])


def test_openai_client_gets_the_offline_vectors(minilm_server: Served) -> None:
    response = _client(minilm_server).embeddings.create(
        model=minilm_server.model, input=TEXTS, encoding_format="float"
    )
    got = np.array([item.embedding for item in response.data], dtype=np.float32)
    np.testing.assert_allclose(got, _offline(minilm_server, TEXTS), rtol=0, atol=1e-6)
    assert [item.index for item in response.data] == [0, 1, 2]
    assert response.model == minilm_server.model
    tokens = sum(out.num_tokens for out in minilm_server.engine.embed(TEXTS))
    assert response.usage.prompt_tokens == response.usage.total_tokens == tokens


def test_openai_client_default_base64_decodes_to_the_same_vectors(minilm_server: Served) -> None:
    """The openai package asks for base64 unless told otherwise and decodes it itself."""
    response = _client(minilm_server).embeddings.create(model=minilm_server.model, input=TEXTS)
    got = np.array([item.embedding for item in response.data], dtype=np.float32)
    np.testing.assert_allclose(got, _offline(minilm_server, TEXTS), rtol=0, atol=1e-6)


def test_base64_is_little_endian_float32_of_the_float_answer(
    minilm_server: Served, http: httpx.Client
) -> None:
    url = f"{minilm_server.url}/v1/embeddings"
    floats = http.post(url, json={"input": TEXTS, "encoding_format": "float"}).json()
    encoded = http.post(url, json={"input": TEXTS, "encoding_format": "base64"}).json()
    for as_float, as_b64 in zip(floats["data"], encoded["data"], strict=True):
        decoded = np.frombuffer(base64.b64decode(as_b64["embedding"]), dtype="<f4")
        assert decoded.shape == (384,)
        np.testing.assert_array_equal(decoded, np.asarray(as_float["embedding"], dtype=np.float32))


def test_a_single_string_gives_one_embedding(minilm_server: Served, http: httpx.Client) -> None:
    body = http.post(f"{minilm_server.url}/v1/embeddings", json={"input": TEXTS[1]}).json()
    assert len(body["data"]) == 1
    np.testing.assert_allclose(
        body["data"][0]["embedding"], _offline(minilm_server, [TEXTS[1]])[0], atol=1e-6
    )


def test_the_api_answers_at_embeddings_too_as_tei_and_infinity_serve_it(
    minilm_server: Served, http: httpx.Client
) -> None:
    """LangChain's InfinityEmbeddings given the bare host posts to /embeddings (it was a 404)."""
    bare = http.post(f"{minilm_server.url}/embeddings", json={"input": TEXTS}).json()
    versioned = http.post(f"{minilm_server.url}/v1/embeddings", json={"input": TEXTS}).json()
    assert [row["embedding"] for row in bare["data"]] == [row["embedding"] for row in versioned["data"]]


def test_token_id_inputs_embed_like_their_text(minilm_server: Served, http: httpx.Client) -> None:
    ids = [minilm_server.engine.tokenize(t) for t in TEXTS]
    url = f"{minilm_server.url}/v1/embeddings"
    one = http.post(url, json={"input": ids[0]}).json()
    many = http.post(url, json={"input": ids}).json()
    expected = _offline(minilm_server, TEXTS)
    np.testing.assert_allclose(one["data"][0]["embedding"], expected[0], atol=1e-6)
    np.testing.assert_allclose([d["embedding"] for d in many["data"]], expected, atol=1e-6)
    assert many["usage"]["prompt_tokens"] == sum(len(i) for i in ids)


@pytest.mark.parametrize("model", [*MINILM_NAMES, None])
def test_every_served_name_or_none_is_accepted(
    minilm_server: Served, http: httpx.Client, model: str | None
) -> None:
    body = {"input": "hello", **({"model": model} if model else {})}
    response = http.post(f"{minilm_server.url}/v1/embeddings", json=body)
    assert response.status_code == 200
    assert response.json()["model"] == MINILM_NAMES[0]


def test_user_field_is_accepted(minilm_server: Served, http: httpx.Client) -> None:
    response = http.post(f"{minilm_server.url}/v1/embeddings", json={"input": "hello", "user": "alice"})
    assert response.status_code == 200


def test_full_dimensions_on_a_plain_model_is_the_full_vector(
    minilm_server: Served, http: httpx.Client
) -> None:
    body = http.post(f"{minilm_server.url}/v1/embeddings", json={"input": "hello", "dimensions": 384}).json()
    np.testing.assert_allclose(body["data"][0]["embedding"], _offline(minilm_server, ["hello"])[0], atol=1e-6)


def test_truncated_dimensions_on_a_plain_model_are_refused(minilm_server: Served, http: httpx.Client) -> None:
    response = http.post(f"{minilm_server.url}/v1/embeddings", json={"input": "hello", "dimensions": 128})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "dimensions" and "not a Matryoshka model" in error["message"]
    # the way out it names on the command line is one poolrag serve takes (--assume-matryoshka is not)
    assert "on the command line --hf-overrides '{\"is_matryoshka\": true}'" in error["message"]


def test_matryoshka_dimensions_match_offline(matryoshka_server: Served) -> None:
    response = _client(matryoshka_server).embeddings.create(
        model=matryoshka_server.model, input=TEXTS, dimensions=128
    )
    got = np.array([item.embedding for item in response.data], dtype=np.float32)
    assert got.shape == (3, 128)
    np.testing.assert_array_equal(got, _offline(matryoshka_server, TEXTS, PoolingParams(dimensions=128)))


def test_unsupported_matryoshka_dimensions_are_refused(matryoshka_server: Served) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        _client(matryoshka_server).embeddings.create(model=matryoshka_server.model, input="x", dimensions=100)
    assert caught.value.status_code == 400
    assert "must be one of [128, 256, 384]" in caught.value.message


def test_over_long_input_is_refused_when_truncation_is_refused(
    minilm_server: Served, http: httpx.Client
) -> None:
    body = {"input": ["short", LONG_TEXT], "truncate": False}
    response = http.post(f"{minilm_server.url}/v1/embeddings", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "context_length_exceeded"
    assert "302 tokens, more than the model's maximum of 256" in error["message"]


@pytest.mark.parametrize("truncate", [-1, 10])
def test_truncate_prompt_tokens_truncates_like_offline(
    minilm_server: Served, http: httpx.Client, truncate: int
) -> None:
    body = http.post(
        f"{minilm_server.url}/v1/embeddings", json={"input": LONG_TEXT, "truncate_prompt_tokens": truncate}
    ).json()
    params = PoolingParams(truncate_prompt_tokens=truncate)
    np.testing.assert_allclose(
        body["data"][0]["embedding"], _offline(minilm_server, [LONG_TEXT], params)[0], atol=1e-6
    )
    assert body["usage"]["prompt_tokens"] == (256 if truncate == -1 else truncate)


def test_langchain_openai_embeddings_get_the_offline_vectors(minilm_server: Served) -> None:
    from langchain_openai import OpenAIEmbeddings

    embeddings = OpenAIEmbeddings(
        model=minilm_server.model,
        base_url=f"{minilm_server.url}/v1",
        api_key="unused",
        check_embedding_ctx_length=False,
        max_retries=0,
    )
    documents = embeddings.embed_documents(TEXTS)
    query = embeddings.embed_query(TEXTS[0])
    expected = _offline(minilm_server, TEXTS)
    np.testing.assert_allclose(np.array(documents, dtype=np.float32), expected, atol=1e-6)
    np.testing.assert_allclose(np.array(query, dtype=np.float32), expected[0], atol=1e-6)


def test_langchains_default_tiktoken_ids_are_a_400_naming_the_setting(minilm_server: Served) -> None:
    """LangChain's OpenAIEmbeddings, left at check_embedding_ctx_length=True, sends the ids tiktoken's
    cl100k_base gives each text ("hello world" is [15339, 1917]) through the openai package."""
    with pytest.raises(openai.BadRequestError) as refused:
        _client(minilm_server).embeddings.create(model=minilm_server.model, input=[[15339, 1917]])
    assert refused.value.body["param"] == "input"
    assert "check_embedding_ctx_length=False" in refused.value.body["message"]


def test_megabytes_of_text_are_tokenised_and_truncated_like_offline(
    minilm_server: Served, http: httpx.Client
) -> None:
    """Big requests take the thread pool rather than the event loop; the answer is the same."""
    text = "retrieval augmented generation " * 40_000  # 1.24 MB
    body = http.post(
        f"{minilm_server.url}/v1/embeddings", json={"input": [text, "short"], "truncate_prompt_tokens": -1}
    ).json()
    expected = _offline(minilm_server, [text, "short"], PoolingParams(truncate_prompt_tokens=-1))
    np.testing.assert_allclose([d["embedding"] for d in body["data"]], expected, rtol=0, atol=1e-6)
    assert body["usage"]["prompt_tokens"] == 256 + 3


@pytest.fixture(scope="module")
def clip_url(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> Iterator[tuple[str, Engine]]:
    pytest.importorskip("PIL.Image", reason="images need the images extra (Pillow)")
    from poolrag.testing.live_server import serve
    from poolrag.testing.tiny_models import build_clip

    engine = Engine(build_clip(tmp_path_factory.mktemp("clip"), minilm_path))
    for url in serve(engine, "clip"):
        yield url, engine


def test_vllm_s_conversation_in_input_is_read_as_messages(clip_url: tuple[str, Engine]) -> None:
    """Current vLLM's /v1/embeddings takes one chat conversation as ``input`` too, as it takes it in
    ``messages``; it was a 400 ("input: must be a string, a list of strings, ...")."""
    url, engine = clip_url
    photo = Path(pytest.importorskip("matplotlib").get_data_path()) / "sample_data" / "grace_hopper.jpg"
    data_url = "data:image/jpeg;base64," + base64.b64encode(photo.read_bytes()).decode()
    part = {"type": "image_url", "image_url": {"url": data_url}}
    answer = httpx.post(f"{url}/v1/embeddings", json={"input": [{"role": "user", "content": [part]}]})
    assert answer.status_code == 200, answer.text
    [row] = answer.json()["data"]
    np.testing.assert_allclose([row["embedding"]], engine.embed_array([photo]), atol=1e-6)


def test_a_conversation_in_input_to_a_text_model_says_why_it_is_refused(
    minilm_server: Served, http: httpx.Client
) -> None:
    body = {"input": [{"role": "user", "content": "hello"}]}
    answer = http.post(f"{minilm_server.url}/v1/embeddings", json=body)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == "input"
    assert error["message"].startswith("input: chat messages need a chat template, which poolrag")


@pytest.mark.parametrize(
    "part",
    [
        pytest.param(lambda url: {"type": "input_image", "image_url": url}, id="input_image"),
        pytest.param(lambda url: {"image_url": url}, id="image_url-without-type"),
        pytest.param(lambda url: {"image_url": {"url": url}}, id="image_url-object-without-type"),
    ],
)
def test_vllm_s_other_image_part_forms_are_read_as_the_image(
    clip_url: tuple[str, Engine], part: Callable[[str], dict]
) -> None:
    """vLLM's chat form reads the Responses API's ``input_image`` part and an ``image_url`` part
    without ``type`` (the plain form OpenAI's API takes) as the image; both were a 400 ('Input tag
    'input_image' ... does not match', 'Unable to extract tag using discriminator')."""
    url, engine = clip_url
    photo = Path(pytest.importorskip("matplotlib").get_data_path()) / "sample_data" / "grace_hopper.jpg"
    data_url = "data:image/jpeg;base64," + base64.b64encode(photo.read_bytes()).decode()
    body = {"messages": [{"role": "user", "content": [part(data_url)]}]}
    answer = httpx.post(f"{url}/v1/embeddings", json=body)
    assert answer.status_code == 200, answer.text
    [row] = answer.json()["data"]
    np.testing.assert_allclose([row["embedding"]], engine.embed_array([photo]), atol=1e-6)


def test_vllm_s_input_text_part_is_read_as_the_text(clip_url: tuple[str, Engine]) -> None:
    url, engine = clip_url
    part = {"type": "input_text", "text": "a photo of an admiral"}
    answer = httpx.post(f"{url}/v1/embeddings", json={"messages": [{"role": "user", "content": [part]}]})
    assert answer.status_code == 200, answer.text
    [row] = answer.json()["data"]
    np.testing.assert_allclose([row["embedding"]], engine.embed_array([part["text"]]), atol=1e-6)


def test_an_input_image_part_with_a_remote_url_is_refused_unfetched(clip_url: tuple[str, Engine]) -> None:
    url, _ = clip_url
    part = {"type": "input_image", "image_url": "http://example.com/cat.png"}
    answer = httpx.post(f"{url}/v1/embeddings", json={"messages": [{"role": "user", "content": [part]}]})
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == (
        "messages[0].content[0].image_url must be a data:image/...;base64, URL (nothing is fetched)"
    )
