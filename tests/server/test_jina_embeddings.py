"""Jina's embeddings body on ``POST /v1/embeddings`` (api.jina.ai's shape, as its docs write it):
``task``, ``normalized``, ``embedding_type``, ``late_chunking: true`` and ``{"text": ...}`` inputs,
each answered as the engine answers the same request, called with httpx."""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from poolrag import Engine, PoolingParams
from poolrag.postprocess.vector_precision import quantize_vectors

from .conftest import Served, serve_in_thread

TEXTS = ["Organic skincare for sensitive skin.", "Bio-Hautpflege für empfindliche Haut.", "Paris in spring."]
QUERY_PROMPT = "Represent the query for retrieving passages: "
PIXEL = (  # a white 1x1 PNG
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4//8/AAX+Av4N70a4AAAAAElFTkSuQmCC"
)


def _vectors(answer: httpx.Response) -> np.ndarray:
    assert answer.status_code == 200, answer.text
    return np.array([item["embedding"] for item in answer.json()["data"]])


def test_jinas_documented_body_is_answered_as_the_engine_embeds(
    minilm_server: Served, http: httpx.Client
) -> None:
    """The body of Jina's API reference: task text-matching (no prompt), late_chunking false,
    embedding_type float, input objects."""
    body = {
        "model": minilm_server.model,
        "task": "text-matching",
        "late_chunking": False,
        "embedding_type": "float",
        "input": [{"text": t} for t in TEXTS],
    }
    answer = http.post(f"{minilm_server.url}/v1/embeddings", json=body)
    np.testing.assert_allclose(_vectors(answer), minilm_server.engine.embed_array(TEXTS), rtol=0, atol=1e-6)
    assert answer.json()["usage"]["total_tokens"] > 0  # what Jina's clients read


def test_late_chunking_true_pools_each_input_with_the_others_as_context(
    minilm_server: Served, http: httpx.Client
) -> None:
    body = {"model": minilm_server.model, "late_chunking": True, "input": TEXTS}
    got = _vectors(http.post(f"{minilm_server.url}/v1/embeddings", json=body))
    document = " ".join(TEXTS)
    starts = [document.index(t) for t in TEXTS]
    spans = [(start, start + len(t)) for start, t in zip(starts, TEXTS, strict=True)]
    np.testing.assert_allclose(got, minilm_server.engine.embed_chunks(document, spans), rtol=0, atol=1e-6)
    assert not np.allclose(got, minilm_server.engine.embed_array(TEXTS), atol=1e-3)  # context changed them


def test_embedding_types_and_normalized(minilm_server: Served, http: httpx.Client) -> None:
    url = f"{minilm_server.url}/v1/embeddings"
    full = minilm_server.engine.embed_array(TEXTS)
    for kind in ("binary", "ubinary"):
        got = _vectors(http.post(url, json={"input": TEXTS, "embedding_type": kind}))
        np.testing.assert_array_equal(got, quantize_vectors(full, kind))
    answer = http.post(url, json={"input": TEXTS[:1], "embedding_type": "base64"}).json()
    decoded = np.frombuffer(base64.b64decode(answer["data"][0]["embedding"]), dtype="<f4")
    np.testing.assert_allclose(decoded, full[0], rtol=0, atol=1e-6)
    raw = _vectors(http.post(url, json={"input": TEXTS, "normalized": False}))
    expected = minilm_server.engine.embed_array(TEXTS, PoolingParams(normalize=False))
    np.testing.assert_allclose(raw, expected, rtol=0, atol=1e-5)


def test_jinas_older_encoding_type_is_embedding_type(minilm_server: Served, http: httpx.Client) -> None:
    """Jina's API took the output type as ``encoding_type`` first, and clients still send it on every
    call: LlamaIndex's JinaEmbedding (``"encoding_type": "float"`` by default, its binary kinds
    unpacked from what comes back) and RAGFlow's Jina embedder, whose base URL is configurable."""
    url = f"{minilm_server.url}/v1/embeddings"
    full = minilm_server.engine.embed_array(TEXTS)
    floats = http.post(url, json={"input": TEXTS, "model": minilm_server.model, "encoding_type": "float"})
    np.testing.assert_allclose(_vectors(floats), full, rtol=0, atol=1e-6)
    packed = _vectors(http.post(url, json={"input": TEXTS, "encoding_type": "ubinary"}))
    bits = np.unpackbits(packed.astype("uint8"), axis=1)  # as LlamaIndex's JinaEmbedding reads ubinary
    np.testing.assert_array_equal(bits, (full > 0).astype("uint8"))
    signed = _vectors(http.post(url, json={"input": TEXTS, "encoding_type": "binary"}))
    np.testing.assert_array_equal(signed, quantize_vectors(full, "binary"))
    answer = http.post(url, json={"input": TEXTS[:1], "encoding_type": "base64"}).json()
    decoded = np.frombuffer(base64.b64decode(answer["data"][0]["embedding"]), dtype="<f4")
    np.testing.assert_allclose(decoded, full[0], rtol=0, atol=1e-6)


@pytest.fixture(scope="module")
def prompted(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Engine]]:
    """A folder whose prompts are named by Jina's tasks, as jina-embeddings-v3's are."""
    folder = tmp_path_factory.mktemp("jina-prompts") / "model"
    shutil.copytree(minilm_path, folder)
    config = folder / "config_sentence_transformers.json"
    settings = json.loads(config.read_text()) if config.exists() else {}
    settings["prompts"] = {
        "retrieval.query": QUERY_PROMPT,
        "retrieval.passage": "",
        "separation": "Cluster: ",
    }
    config.write_text(json.dumps(settings))
    engine = Engine(folder)
    with serve_in_thread(engine) as url:
        yield url, engine


def test_a_task_is_the_folders_prompt_of_that_name(prompted: tuple[str, Engine]) -> None:
    url, engine = prompted
    for task, prompt in (("retrieval.query", QUERY_PROMPT), ("separation", "Cluster: ")):
        got = _vectors(httpx.post(f"{url}/v1/embeddings", json={"input": TEXTS, "task": task}, timeout=60))
        expected = engine.embed_array(TEXTS, PoolingParams(prompt=prompt))
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)


def test_a_retrieval_task_without_such_prompts_is_the_query_or_document_role(
    minilm_server: Served, http: httpx.Client
) -> None:
    got = _vectors(
        http.post(f"{minilm_server.url}/v1/embeddings", json={"input": TEXTS, "task": "retrieval.query"})
    )
    expected = minilm_server.engine.embed_array(TEXTS, PoolingParams(input_type="query"))
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"input": TEXTS, "task": "code.query"}, "task 'code.query' is not one this model takes"),
        ({"input": TEXTS, "embedding_type": "float", "encoding_format": "base64"}, "not both"),
        ({"input": TEXTS, "encoding_type": "float", "embedding_type": "binary"}, "disagree"),
        ({"input": TEXTS, "encoding_type": "float", "encoding_format": "base64"}, "not both"),
        ({"input": TEXTS, "normalized": False, "normalize": True}, "disagree"),
        ({"input": TEXTS, "task": "retrieval.query", "input_type": "query"}, "give it or input_type"),
        ({"input": "one text", "late_chunking": True}, "a list of strings"),
        ({"input": [{"image": "https://example.com/cat.png"}]}, "input[0].image must be a data:image"),
        ({"input": [{"image": PIXEL}]}, "input[0]: this model reads text only, not images"),
        ({"input": ["a b", " ", "c"], "late_chunking": True}, "input[1] is empty"),
        # a combining accent alone, which the tokenizer drops: named as the text sent, not as a span
        ({"input": ["a b", "\u0301", "c"], "late_chunking": True}, "input[1] = [4, 5] covers no token"),
        ({"input": [{"text": "a"}, {"image": PIXEL}], "late_chunking": True}, "input[1] is an image"),
    ],
)
def test_jina_fields_that_cannot_be_honoured_are_400s(
    minilm_server: Served, http: httpx.Client, body: dict, said: str
) -> None:
    answer = http.post(f"{minilm_server.url}/v1/embeddings", json=body)
    assert answer.status_code == 400, answer.text
    assert said in answer.json()["error"]["message"], answer.text
