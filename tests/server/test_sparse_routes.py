"""Sparse vectors over HTTP: ``/pooling`` with ``task: "sparse_embed"`` and TEI's ``/embed_sparse``,
equal to the engine's ``sparse_embed``; errors in each route's own shape (TEI's, vLLM's)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from poolrag import Engine, PoolingParams
from poolrag.sparse import SparseVector
from poolrag.testing.tiny_models import SENTENCES, build_bge_m3, build_splade

from .conftest import Served, serve_in_thread

TEXTS = [*SENTENCES[:4], "Part number XK-4471 fits the 2019 model only."]


@pytest.fixture(scope="module")
def splade_server(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    engine = Engine(build_splade(tmp_path_factory.mktemp("splade"), minilm_path))
    with serve_in_thread(engine, served_model_names=("splade",)) as url:
        yield Served(url, "splade", engine)


@pytest.fixture(scope="module")
def m3_server(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    engine = Engine(build_bge_m3(tmp_path_factory.mktemp("m3"), minilm_path))
    with serve_in_thread(engine, served_model_names=("bge-m3",)) as url:
        yield Served(url, "bge-m3", engine)


def _vector(entries: list[dict[str, float]]) -> SparseVector:
    assert [set(e) for e in entries] == [{"index", "value"}] * len(entries)
    return SparseVector([e["index"] for e in entries], [e["value"] for e in entries])


@pytest.mark.parametrize("server", ["splade_server", "m3_server"])
def test_embed_sparse_equals_the_engine(
    server: str, request: pytest.FixtureRequest, http: httpx.Client
) -> None:
    served: Served = request.getfixturevalue(server)
    expected = served.engine.sparse_embed(TEXTS)
    response = http.post(f"{served.url}/embed_sparse", json={"inputs": TEXTS})
    assert response.status_code == 200, response.text
    body = response.json()
    assert len(body) == len(TEXTS)
    for entries, vector in zip(body, expected, strict=True):
        got = _vector(entries)  # sorted unique ids, or SparseVector refuses them
        assert got.indices.tolist() == vector.indices.tolist()
        assert got.values.tolist() == pytest.approx(vector.values.tolist(), rel=1e-6, abs=1e-7)
    single = http.post(f"{served.url}/embed_sparse", json={"inputs": TEXTS[0]}).json()
    assert len(single) == 1 and _vector(single[0]) == _vector(body[0])


def test_pooling_sparse_task_equals_the_engine(m3_server: Served, http: httpx.Client) -> None:
    params = PoolingParams(max_active_dims=3)
    expected = m3_server.engine.sparse_embed(TEXTS, params)
    body = http.post(
        f"{m3_server.url}/pooling",
        json={"input": TEXTS, "task": "sparse_embed", "max_active_dims": 3, "model": "bge-m3"},
    ).json()
    assert [item["index"] for item in body["data"]] == list(range(len(TEXTS)))
    for item, vector in zip(body["data"], expected, strict=True):
        assert item["object"] == "pooling"
        got = _vector(item["data"])
        assert len(got) <= 3
        assert got.to_dict() == pytest.approx(vector.to_dict(), rel=1e-6)
    assert body["usage"]["prompt_tokens"] == sum(len(m3_server.engine.tokenize(t)) for t in TEXTS)


def test_the_other_tasks_of_a_three_head_model_stay_served(m3_server: Served, http: httpx.Client) -> None:
    body = http.post(f"{m3_server.url}/v1/embeddings", json={"input": TEXTS[0]}).json()
    assert body["data"][0]["embedding"] == pytest.approx(
        m3_server.engine.embed_array(TEXTS[:1])[0].tolist(), abs=1e-6
    )
    models = http.get(f"{m3_server.url}/v1/models").json()
    assert "sparse_embed" in models["data"][0]["supported_tasks"]


def test_sparse_errors_name_the_supported_tasks_in_each_routes_shape(
    splade_server: Served, colbert_server: Served, http: httpx.Client
) -> None:
    """/embed_sparse fails as TEI does (``{"error", "error_type"}``, 424 for a model without sparse
    weights), /pooling as vLLM does."""
    unsupported = http.post(f"{colbert_server.url}/embed_sparse", json={"inputs": "hello"})
    assert unsupported.status_code == 424
    error = unsupported.json()
    assert error["error_type"] == "Backend" and "token_embed, score" in error["error"]
    wrong_task = http.post(f"{splade_server.url}/pooling", json={"input": "hello", "task": "embed"})
    assert wrong_task.status_code == 400
    assert "supported tasks: sparse_embed" in wrong_task.json()["error"]["message"]
    unknown = http.post(f"{splade_server.url}/pooling", json={"input": "hello", "task": "splade"})
    assert unknown.status_code == 400 and "sparse_embed" in unknown.json()["error"]["message"]
    too_long = http.post(
        f"{splade_server.url}/embed_sparse", json={"inputs": "word " * 600, "truncate": False}
    )
    assert too_long.status_code == 422
    assert too_long.json()["error_type"] == "Validation" and "tokens" in too_long.json()["error"]
    truncated = http.post(
        f"{splade_server.url}/embed_sparse", json={"inputs": "word " * 600, "truncate": True}
    )
    assert truncated.status_code == 200 and len(truncated.json()[0]) > 0
    assert truncated.headers["x-truncated-inputs"] == "1"
    for bad, status in (({"inputs": []}, 400), ({"inputs": 3}, 422), ({}, 422)):
        response = http.post(f"{splade_server.url}/embed_sparse", json=bad)
        assert response.status_code == status, bad
        assert set(response.json()) == {"error", "error_type"}
    not_served = http.post(f"{splade_server.url}/embed_sparse", json={"inputs": "hi", "model": "other"})
    assert not_served.status_code == 404 and "'other' is not served" in not_served.json()["error"]


def test_pooling_sparse_task_refuses_base64(splade_server: Served, http: httpx.Client) -> None:
    """base64 carries an array's values; a sparse answer is {index, value} objects, so it is a 400
    naming the field, not objects silently sent as floats."""
    body = {"input": TEXTS, "task": "sparse_embed", "encoding_format": "base64"}
    response = http.post(f"{splade_server.url}/pooling", json=body)
    assert response.status_code == 400 and response.json()["error"]["param"] == "encoding_format"


def test_embed_sparse_weights_count_against_the_answer_limit(
    minilm_path: Path, tmp_path_factory: pytest.TempPathFactory, http: httpx.Client
) -> None:
    """A SPLADE vector can weigh much of the vocabulary, so /embed_sparse is bounded as /pooling's
    sparse_embed is: its answer past --max-answer-values is TEI's 413 naming the option."""
    engine = Engine(build_splade(tmp_path_factory.mktemp("splade_limit"), minilm_path))
    weights = sum(len(vector.indices) for vector in engine.sparse_embed(TEXTS[:2]))
    with serve_in_thread(engine, served_model_names=("splade",), max_answer_values=weights) as url:
        assert http.post(f"{url}/embed_sparse", json={"inputs": TEXTS[:2]}).status_code == 200
        refused = http.post(f"{url}/embed_sparse", json={"inputs": TEXTS[:3]})
    assert refused.status_code == 413, refused.text
    assert "--max-answer-values" in refused.json()["error"]


def test_a_prompt_by_name_reaches_the_sparse_model_through_pooling_and_the_client(
    minilm_path: Path, tmp_path: Path, http: httpx.Client
) -> None:
    """``Engine.sparse_embed`` takes ``prompt_name`` (sentence-transformers' ``encode(prompt_name=)``)
    and TEI's ``/embed_sparse`` does, but ``/pooling`` had no such field, so ``PoolragClient``
    refused the call ("/pooling does not accept prompt_name over HTTP") where the engine it stands
    in for answered. Both now send the folder's prompt, and ``prompt`` as text."""
    import json

    from sentence_transformers import SparseEncoder

    from poolrag.client import PoolragClient

    folder = build_splade(tmp_path / "prompted", minilm_path)
    config = json.loads((folder / "config_sentence_transformers.json").read_text())
    prompts = {"query": "query: ", "document": "passage: ", "title": "title of a page: "}
    (folder / "config_sentence_transformers.json").write_text(json.dumps(config | {"prompts": prompts}))
    engine = Engine(folder)
    reference = SparseEncoder(str(folder), device="cpu")
    with serve_in_thread(engine, served_model_names=("splade",)) as url:
        client = PoolragClient(url)
        for fields in ({"prompt_name": "title"}, {"prompt": "title of a page: "}):
            want = reference.encode(TEXTS, convert_to_tensor=True, **fields).to_dense().numpy()
            expected = engine.sparse_embed(TEXTS, PoolingParams(**fields))
            for vector, row in zip(expected, want, strict=True):
                assert vector.indices.tolist() == row.nonzero()[0].tolist()
                assert vector.values.tolist() == pytest.approx(row[vector.indices].tolist(), abs=1e-6)
            body = {"input": TEXTS, "task": "sparse_embed", **fields}
            response = http.post(f"{url}/pooling", json=body)
            assert response.status_code == 200, response.text
            assert [_vector(d["data"]) for d in response.json()["data"]] == expected
            assert client.sparse_embed(TEXTS, PoolingParams(**fields)) == expected
        unknown = http.post(
            f"{url}/pooling", json={"input": TEXTS, "task": "sparse_embed", "prompt_name": "x"}
        )
        assert unknown.status_code == 400 and "'title'" in unknown.text
