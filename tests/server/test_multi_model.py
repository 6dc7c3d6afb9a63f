"""Several models in one server: each request picks its model by the ``model`` field, and each
model keeps its own names, limits, queue and metrics label."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import cohere
import httpx
import numpy as np
import openai
import pytest

from poolrag import Engine
from poolrag.client import PoolragClient
from poolrag.client.wire import MODEL_IDENTITY_HEADER
from poolrag.errors import UnsupportedTaskError
from poolrag.server import ServerSettings
from poolrag.server.app import create_models_app
from poolrag.server.state import check_unique_names
from poolrag.testing.live_server import LiveServer

from .conftest import cli_server, metric_samples
from .test_admission import BUSY_TEXTS

PASSAGES = [
    "Paris is the capital of France.",
    "Pandas eat bamboo in the mountains of China.",
    "The Eiffel Tower stands in Paris.",
]


@dataclass(frozen=True)
class TwoModels:
    url: str
    embedder: Engine
    reranker: Engine


@pytest.fixture(scope="module")
def two_models(minilm_engine: Engine, cross_encoder_engine: Engine) -> Iterator[TwoModels]:
    app = create_models_app(
        [
            (minilm_engine, ServerSettings(served_model_names=("embedder", "minilm"), max_queue=1)),
            (cross_encoder_engine, ServerSettings(served_model_names=("reranker",))),
        ]
    )
    with LiveServer(app) as live:
        yield TwoModels(live.url, minilm_engine, cross_encoder_engine)


def test_embed_on_one_model_and_rerank_on_the_other(two_models: TwoModels) -> None:
    with httpx.Client(timeout=120) as http:
        embedded = http.post(f"{two_models.url}/v1/embeddings", json={"model": "embedder", "input": PASSAGES})
        reranked = http.post(
            f"{two_models.url}/rerank",
            json={"model": "reranker", "query": "What is the capital of France?", "documents": PASSAGES},
        )
    assert embedded.status_code == 200 and embedded.json()["model"] == "embedder"
    vectors = np.array([row["embedding"] for row in embedded.json()["data"]])
    offline = np.array([out.outputs.embedding for out in two_models.embedder.embed(PASSAGES)])
    np.testing.assert_allclose(vectors, offline, atol=1e-5)
    assert reranked.status_code == 200 and reranked.json()["model"] == "reranker"
    scores = {row["index"]: row["relevance_score"] for row in reranked.json()["results"]}
    expected = [
        out.outputs.score for out in two_models.reranker.score("What is the capital of France?", PASSAGES)
    ]
    np.testing.assert_allclose([scores[i] for i in range(len(PASSAGES))], expected, atol=1e-5)
    # each answer names the weights of the model that produced it
    assert unquote(embedded.headers[MODEL_IDENTITY_HEADER]).startswith("embedder@")
    assert unquote(reranked.headers[MODEL_IDENTITY_HEADER]).startswith("reranker@")
    # an answer no model gave names none of them
    with httpx.Client(timeout=120) as http:
        unknown = http.post(f"{two_models.url}/v1/embeddings", json={"model": "gpt-4", "input": "x"})
    assert unknown.status_code == 404 and MODEL_IDENTITY_HEADER not in unknown.headers


def test_an_alias_and_a_missing_model_field_reach_their_model(two_models: TwoModels) -> None:
    with httpx.Client(timeout=120) as http:
        alias = http.post(f"{two_models.url}/v1/embeddings", json={"model": "minilm", "input": "hello"})
        default = http.post(f"{two_models.url}/v1/embeddings", json={"input": "hello"})
    assert alias.status_code == 200 and default.status_code == 200
    assert default.json()["model"] == "embedder"  # no model field: the first model, as with one model
    assert alias.json()["data"][0]["embedding"] == default.json()["data"][0]["embedding"]


@pytest.mark.parametrize(
    ("path", "body", "answered_by"),
    [
        ("/v1/embeddings", {"input": "hello"}, "embedder"),
        ("/v2/embed", {"texts": ["hello"]}, "embedder"),
        ("/score", {"text_1": "q", "text_2": "d"}, "reranker"),
        ("/rerank", {"query": "q", "documents": ["d"]}, "reranker"),
        ("/pooling", {"input": "hello", "task": "token_embed"}, "embedder"),
        ("/pooling", {"input": "hello", "task": "classify"}, "reranker"),  # its task picks the model
        ("/tokenize", {"prompt": "hello"}, "embedder"),
    ],
)
def test_an_empty_model_name_reaches_the_first_model_that_runs_the_route(
    two_models: TwoModels, path: str, body: dict, answered_by: str
) -> None:
    """As a one-model server answers it, by the first model; scores by the first cross-encoder."""
    answer = httpx.post(f"{two_models.url}{path}", json={"model": "", **body}, timeout=120)
    assert answer.status_code == 200, answer.text
    assert unquote(answer.headers[MODEL_IDENTITY_HEADER]).startswith(f"{answered_by}@")


def test_a_tei_client_naming_no_model_reranks_with_the_reranker_served_beside_the_embedder(
    two_models: TwoModels,
) -> None:
    """TEI's clients (LlamaIndex's TextEmbeddingInference reranker, huggingface_hub) send no model:
    their /rerank reached the first model, the embedder, and ranked by its cosine without a word."""
    query = "What is the capital of France?"
    tei = httpx.post(f"{two_models.url}/rerank", json={"query": query, "texts": PASSAGES}, timeout=120)
    named = httpx.post(
        f"{two_models.url}/rerank", json={"model": "reranker", "query": query, "texts": PASSAGES}, timeout=120
    )
    assert tei.status_code == 200 and tei.json() == named.json()
    assert unquote(tei.headers[MODEL_IDENTITY_HEADER]).startswith("reranker@")
    embedded = httpx.post(f"{two_models.url}/embed", json={"inputs": "hello"}, timeout=120)
    assert unquote(embedded.headers[MODEL_IDENTITY_HEADER]).startswith("embedder@")


def test_a_sparse_request_naming_no_model_reaches_the_sparse_model_served_second(
    cross_encoder_engine: Engine, tmp_path: Path, minilm_path: Path
) -> None:
    """TEI's /embed_sparse and /pooling's sparse_embed reached the first model (a reranker here),
    which answered that it cannot, though the server holds a SPLADE model."""
    from poolrag.testing.tiny_models import build_splade

    splade = Engine(build_splade(tmp_path / "splade", minilm_path), tune="off")
    app = create_models_app(
        [
            (cross_encoder_engine, ServerSettings(served_model_names=("reranker",))),
            (splade, ServerSettings(served_model_names=("splade",))),
        ]
    )
    with LiveServer(app) as live, httpx.Client(timeout=120) as http:
        tei = http.post(f"{live.url}/embed_sparse", json={"inputs": "hello"})
        pooled = http.post(f"{live.url}/pooling", json={"input": "hello", "task": "sparse_embed"})
    assert tei.status_code == 200 and pooled.status_code == 200, (tei.text, pooled.text)
    (vector,) = splade.sparse_embed(["hello"])
    assert [entry["index"] for entry in tei.json()[0]] == vector.indices.tolist()
    assert unquote(pooled.headers[MODEL_IDENTITY_HEADER]).startswith("splade@")


def test_an_empty_model_name_is_not_an_unknown_model(two_models: TwoModels) -> None:
    """No model here labels tokens: the first answers that it cannot, not that no model is named ''.
    /classify reaches the cross-encoder, whose one label classifies."""
    body = {"model": "", "input": "x", "task": "token_classify"}
    answer = httpx.post(f"{two_models.url}/pooling", json=body, timeout=120)
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "unsupported_task"
    assert unquote(answer.headers[MODEL_IDENTITY_HEADER]).startswith("embedder@")
    classified = httpx.post(f"{two_models.url}/classify", json={"model": "", "input": "x"}, timeout=120)
    assert classified.status_code == 200, classified.text
    assert unquote(classified.headers[MODEL_IDENTITY_HEADER]).startswith("reranker@")
    client = openai.OpenAI(base_url=f"{two_models.url}/v1", api_key="unused", max_retries=0)
    assert client.embeddings.create(model="", input="hello").model == "embedder"


def test_an_unknown_model_is_404_naming_every_served_one(two_models: TwoModels) -> None:
    answer = httpx.post(f"{two_models.url}/rerank", json={"model": "gpt-4", "query": "q", "documents": ["d"]})
    assert answer.status_code == 404
    error = answer.json()["error"]
    assert error["code"] == "model_not_found" and error["param"] == "model"
    assert error["message"] == "model 'gpt-4' is not served here; use 'embedder', 'minilm', 'reranker'"
    client = openai.OpenAI(base_url=f"{two_models.url}/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.NotFoundError, match="'embedder', 'minilm', 'reranker'"):
        client.embeddings.create(model="text-embedding-3-small", input="x")


def test_v1_models_lists_both_with_their_tasks(two_models: TwoModels) -> None:
    cards = httpx.get(f"{two_models.url}/v1/models", timeout=30).json()["data"]
    assert [card["id"] for card in cards] == ["embedder", "minilm", "reranker"]
    tasks = {card["id"]: set(card["tasks"]) for card in cards}
    assert "embed" in tasks["embedder"] and "score" in tasks["reranker"]
    assert "embed" not in tasks["reranker"]
    client = openai.OpenAI(base_url=f"{two_models.url}/v1", api_key="unused", max_retries=0)
    assert [model.id for model in client.models.list()] == ["embedder", "minilm", "reranker"]


def test_a_route_the_named_model_cannot_serve_keeps_its_error(two_models: TwoModels) -> None:
    embed = httpx.post(
        f"{two_models.url}/v1/embeddings", json={"model": "reranker", "input": "q"}, timeout=60
    )
    assert embed.status_code == 400 and embed.json()["error"]["code"] == "unsupported_task"
    assert "task 'embed' is not supported" in embed.json()["error"]["message"]
    classify = httpx.post(f"{two_models.url}/classify", json={"model": "embedder", "input": "q"}, timeout=60)
    assert classify.status_code == 400


def test_a_task_refusal_names_the_model_and_those_served_that_run_the_task(
    two_models: TwoModels,
) -> None:
    """With several models, "not supported by this model" does not say which one answered (a
    request naming none reaches the first); the refusal names it and the served models that do."""
    client = openai.OpenAI(base_url=f"{two_models.url}/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError) as refused:
        client.embeddings.create(model="reranker", input="q")
    assert refused.value.code == "unsupported_task"
    assert refused.value.body["message"] == (  # type: ignore[index]
        "task 'embed' is not supported by model 'reranker'; supported tasks: classify, score, reward; "
        "served here for it: 'embedder'"
    )
    with httpx.Client(timeout=60) as http:
        unnamed = http.post(f"{two_models.url}/pooling", json={"input": "x", "task": "token_classify"})
        tei = http.post(f"{two_models.url}/embed", json={"model": "reranker", "inputs": "q"})
    assert unnamed.status_code == 400
    assert unnamed.json()["error"]["message"] == (
        "task 'token_classify' is not supported by model 'embedder'; supported tasks: embed, score, "
        "token_embed; no model served here runs it"
    )
    assert tei.status_code == 424
    assert tei.json() == {
        "error": "task 'embed' is not supported by model 'reranker'; supported tasks: classify, score, "
        "reward; served here for it: 'embedder'",
        "error_type": "Backend",
    }
    # the client refuses before sending, from the served facts, in the same words
    with pytest.raises(UnsupportedTaskError) as local:
        PoolragClient(two_models.url, model="reranker").embed(["q"])
    assert str(local.value) == (
        "task 'embed' is not supported by model 'reranker'; supported tasks: classify, score, reward; "
        "served here for it: 'embedder', 'minilm'"
    )


def test_cohere_embed_on_a_model_that_gives_no_embeddings_names_the_served_embedder(
    two_models: TwoModels,
) -> None:
    """Cohere's embed refuses in its own field names, and like every other route's refusal names
    the served models that do run the task, so a client that picked the wrong name learns the right one."""
    client = cohere.ClientV2(base_url=two_models.url, api_key="unused", timeout=120)
    with pytest.raises(cohere.errors.BadRequestError) as refused:
        client.embed(model="reranker", texts=["q"], input_type="search_query", embedding_types=["float"])
    assert refused.value.body["message"] == (  # type: ignore[index]
        "embedding_types: model 'reranker' gives no embeddings (its tasks: classify, score, reward); "
        "served here for it: 'embedder'"
    )
    assert refused.value.body["error"]["code"] == "unsupported_task"  # type: ignore[index]


def test_metrics_carry_the_model_label(two_models: TwoModels) -> None:
    before = metric_samples(two_models.url)
    with httpx.Client(timeout=120) as http:
        http.post(f"{two_models.url}/v1/embeddings", json={"model": "embedder", "input": ["a", "b"]})
        http.post(
            f"{two_models.url}/score", json={"model": "reranker", "text_1": "q", "text_2": ["x", "y", "z"]}
        )
    after = metric_samples(two_models.url)

    def grew(name: str, labels: tuple[tuple[str, str], ...]) -> float:
        return after[(name, labels)] - before.get((name, labels), 0)

    assert grew("poolrag_engine_sequences_total", (("model", "embedder"),)) == 2
    assert grew("poolrag_engine_sequences_total", (("model", "reranker"),)) == 3
    assert grew("poolrag_request_batch_size_sum", (("model", "embedder"), ("path", "/v1/embeddings"))) == 2
    assert grew("poolrag_request_batch_size_sum", (("model", "reranker"), ("path", "/score"))) == 3
    assert after[("poolrag_queue_capacity", (("model", "embedder"),))] == 1
    assert after[("poolrag_queue_capacity", (("model", "reranker"),))] == 256


def test_one_models_full_queue_does_not_refuse_the_other(two_models: TwoModels) -> None:
    url = two_models.url
    outcome: dict[str, httpx.Response] = {}
    with httpx.Client(timeout=300) as http:
        busy = threading.Thread(
            target=lambda: outcome.setdefault(
                "busy", http.post(f"{url}/v1/embeddings", json={"model": "embedder", "input": BUSY_TEXTS})
            )
        )
        busy.start()
        deadline = time.monotonic() + 60
        while metric_samples(url)[("poolrag_queue_depth", (("model", "embedder"),))] < 1:
            assert busy.is_alive() and time.monotonic() < deadline, "the busy request never took the slot"
            time.sleep(0.005)
        refused = http.post(f"{url}/v1/embeddings", json={"model": "embedder", "input": "one more"})
        other = http.post(f"{url}/score", json={"model": "reranker", "text_1": "q", "text_2": ["d"]})
        still_busy = busy.is_alive()
        busy.join(timeout=300)
    assert still_busy, "the embedder's slot was freed before the reranker answered; nothing was shown"
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "queue_full"
    assert other.status_code == 200
    assert outcome["busy"].status_code == 200
    rejected = metric_samples(url)
    assert rejected[("poolrag_queue_rejections_total", (("model", "embedder"),))] >= 1
    assert rejected[("poolrag_queue_rejections_total", (("model", "reranker"),))] == 0


def test_a_served_name_given_to_two_models_is_refused(
    minilm_engine: Engine, cross_encoder_engine: Engine
) -> None:
    with pytest.raises(ValueError, match="served model name 'm' is given to two models"):
        create_models_app(
            [
                (minilm_engine, ServerSettings(served_model_names=("m",))),
                (cross_encoder_engine, ServerSettings(served_model_names=("r", "m"))),
            ]
        )
    with pytest.raises(ValueError, match="served model name 'x' is given twice to one model"):
        check_unique_names([("x", "y", "x")])  # --served-model-name x y x: not "two models"


def test_poolrag_serve_runs_an_embedder_and_a_reranker_from_a_models_file(
    minilm_path: Path, cross_encoder_path: Path, tmp_path: Path
) -> None:
    models_file = tmp_path / "models.toml"
    models_file.write_text(
        f'[[model]]\nmodel = "{cross_encoder_path}"\nserved_model_name = "reranker"\nmax_queue = 2\n',
        encoding="utf-8",
    )
    args = [str(minilm_path), "--served-model-name", "embedder", "--models-file", str(models_file)]
    server = cli_server(tmp_path / "server.log", *args, "--log-level", "warning")
    with server as (url, _), httpx.Client(timeout=120) as http:
        ids = [card["id"] for card in http.get(f"{url}/v1/models").json()["data"]]
        embedded = http.post(f"{url}/v1/embeddings", json={"input": "capital of France"})
        reranked = http.post(
            f"{url}/rerank", json={"model": "reranker", "query": "capital of France", "documents": PASSAGES}
        )
        metrics = http.get(f"{url}/metrics").text
    assert ids == ["embedder", "reranker"]
    assert embedded.status_code == 200 and embedded.json()["model"] == "embedder"
    assert reranked.status_code == 200 and reranked.json()["results"][0]["index"] in (0, 2)
    assert 'poolrag_queue_capacity{model="reranker"} 2.0' in metrics


def test_tei_info_describes_the_model_its_query_names(two_models: TwoModels) -> None:
    """/info described the first model whatever the caller wanted to know about; ``?model=`` (poolrag's
    parameter: TEI's clients send none) names another, and an unknown name is the usual 404."""
    with httpx.Client(timeout=60) as http:
        first = http.get(f"{two_models.url}/info").json()
        reranker = http.get(f"{two_models.url}/info", params={"model": "reranker"})
        alias = http.get(f"{two_models.url}/info", params={"model": "minilm"}).json()
        unknown = http.get(f"{two_models.url}/info", params={"model": "gpt-4"})
    assert first["model_id"] == alias["model_id"] == "embedder" and "embedding" in first["model_type"]
    assert reranker.status_code == 200 and reranker.json()["model_id"] == "reranker"
    assert "reranker" in reranker.json()["model_type"]
    assert unquote(reranker.headers[MODEL_IDENTITY_HEADER]).startswith("reranker@")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"


def test_a_tei_body_naming_an_unserved_model_is_its_404_whatever_its_shape(two_models: TwoModels) -> None:
    """At / and /invocations a body's shape depends on the model it names; a misspelt reranker's
    rerank body is answered by the name's 404 (TEI's shape), not as a malformed embedding body."""
    body = {"model": "rerankr", "query": "Where is the Eiffel Tower?", "texts": PASSAGES}
    with httpx.Client(timeout=60) as http:
        for path in ("/", "/invocations"):
            answer = http.post(f"{two_models.url}{path}", json=body)
            assert answer.status_code == 404, (path, answer.text)
            assert answer.json() == {
                "error": "model 'rerankr' is not served here; use 'embedder', 'minilm', 'reranker'",
                "error_type": "Validation",
            }
