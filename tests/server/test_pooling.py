"""POST /pooling: any task's raw pooled data as nested lists, as ``engine.encode``."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import httpx
import numpy as np

from poolrag import PoolingParams
from poolrag.config.pooler_config import POOLER_TASKS
from poolrag.server.schemas import PoolingResponse, PoolingTaskName

from .conftest import Served


def test_the_body_names_every_task_the_engine_pools() -> None:
    """``task`` is spelled for the OpenAPI schema; a task added to ``model_facts.PoolingTask`` must be
    added here too, or ``/pooling`` answers it with a 422."""
    assert set(get_args(PoolingTaskName)) == set(POOLER_TASKS)


def test_token_embeddings_equal_offline(minilm_server: Served, http: httpx.Client) -> None:
    body = http.post(
        f"{minilm_server.url}/pooling", json={"input": ["hello world", "a b c"], "task": "token_embed"}
    ).json()
    expected = [
        out.outputs.data for out in minilm_server.engine.encode(["hello world", "a b c"], "token_embed")
    ]
    for item, data in zip(body["data"], expected, strict=True):
        assert item["object"] == "pooling"
        got = np.asarray(item["data"], dtype=np.float32)
        assert got.shape == data.shape == (len(data), 384)
        np.testing.assert_allclose(got, data, rtol=0, atol=1e-6)


def test_answers_are_the_schemas_json_byte_for_byte(
    minilm_server: Served, cross_encoder_server: Served, http: httpx.Client
) -> None:
    """Written by orjson from the arrays, each answer is what pydantic writes for its schema:
    per-token rows, a reward's row, and base64."""
    for url, body in [
        (minilm_server.url, {"input": ["hello world", "a b c"], "task": "token_embed"}),
        (minilm_server.url, {"input": "hello", "task": "token_embed", "encoding_format": "base64"}),
        (cross_encoder_server.url, {"input": ["good", "bad"], "task": "reward"}),
    ]:
        raw = http.post(f"{url}/pooling", json=body).content
        assert PoolingResponse.model_validate_json(raw).model_dump_json().encode() == raw


def test_a_request_naming_no_task_gets_vllms_choice(minilm_server: Served, http: httpx.Client) -> None:
    """Current vLLM's /pooling runs the model's pooling task when a request names none
    (``ModelConfig.get_pooling_task``): an embedding model's answer is its one vector per input.
    It was one row per token here (token_embed, the choice of older vLLM releases)."""
    body = http.post(f"{minilm_server.url}/pooling", json={"input": "hello"}).json()
    expected = minilm_server.engine.embed(["hello"])[0].outputs.embedding
    got = np.asarray(body["data"][0]["data"], dtype=np.float32)
    assert got.shape == expected.shape == (384,)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)


def test_a_cross_encoder_naming_no_task_classifies(cross_encoder_server: Served, http: httpx.Client) -> None:
    """vLLM's pooling task of a sequence classifier is classify: its probabilities, as /classify."""
    body = http.post(f"{cross_encoder_server.url}/pooling", json={"input": ["good", "bad"]}).json()
    expected = [out.outputs.probs for out in cross_encoder_server.engine.classify(["good", "bad"])]
    for item, probs in zip(body["data"], expected, strict=True):
        np.testing.assert_allclose(item["data"], probs, rtol=0, atol=1e-6)


def test_a_reward_model_naming_no_task_answers_its_head_on_every_token(tmp_path: Path) -> None:
    """vLLM pools a ``*ForRewardModel`` for token_classify only: /pooling without a task answers one
    row per token, though poolrag runs classify on the model too (and classify comes first for others)."""
    from decoders.decoder_remote_code import qwen2_reward_model
    from decoders.tiny_decoders import build_tokenizer, tiny_config

    from poolrag import Engine
    from poolrag.testing.live_server import serve

    values = tiny_config("qwen2", len(build_tokenizer(tmp_path))).to_dict()
    for key in ("architectures", "transformers_version", "auto_map"):
        values.pop(key, None)
    qwen2_reward_model(tmp_path, values, process=False)
    engine = Engine(str(tmp_path), trust_remote_code=True)
    assert engine.supported_tasks[0] == "classify" and "token_classify" in engine.supported_tasks
    expected = [out.outputs.data for out in engine.encode(["a b c d", "one two"], "token_classify")]
    for url in serve(engine, "reward"):
        body = httpx.post(f"{url}/pooling", json={"input": ["a b c d", "one two"]}, timeout=60).json()
    for item, rows in zip(body["data"], expected, strict=True):
        assert np.asarray(item["data"]).shape == rows.shape and rows.shape[0] > 1
        np.testing.assert_allclose(item["data"], rows, rtol=0, atol=1e-6)


def test_the_default_task_follows_vllms_order() -> None:
    from poolrag.server.routes.pooling import default_pooling_task

    assert default_pooling_task(("embed", "score", "token_embed"), "embed") == "embed"
    assert default_pooling_task(("token_embed", "score"), "token_embed") == "token_embed"  # ColBERT
    assert default_pooling_task(("embed", "sparse_embed", "token_embed", "score"), "embed") == "embed"
    assert default_pooling_task(("token_classify", "reward"), "token_classify") == "token_classify"
    assert default_pooling_task(("score", "classify", "reward"), "score") == "classify"  # a cross-encoder
    assert default_pooling_task(("sparse_embed",), "sparse_embed") == "sparse_embed"  # SPLADE
    # a *ForRewardModel: vLLM pools it for token_classify only, its head on every token
    tasks = ("classify", "score", "reward", "token_classify")
    assert default_pooling_task(tasks, "classify", per_token_head=True) == "token_classify"
    # a pooler config naming the task (vLLM's PoolerConfig.task) decides, as vLLM's pooling task does
    assert default_pooling_task(("classify", "score", "token_classify"), "classify", "token_classify") == (
        "token_classify"
    )


def test_colbert_query_token_vectors_equal_offline(colbert_server: Served, http: httpx.Client) -> None:
    body = http.post(
        f"{colbert_server.url}/pooling",
        json={"input": "what is late interaction?", "task": "token_embed", "input_type": "query"},
    ).json()
    params = PoolingParams(input_type="query")
    expected = colbert_server.engine.encode("what is late interaction?", "token_embed", params)[
        0
    ].outputs.data
    np.testing.assert_allclose(body["data"][0]["data"], expected, rtol=0, atol=1e-6)


def test_reward_equals_offline(cross_encoder_server: Served, http: httpx.Client) -> None:
    body = http.post(
        f"{cross_encoder_server.url}/pooling", json={"input": ["good", "bad"], "task": "reward"}
    ).json()
    expected = [out.outputs.data for out in cross_encoder_server.engine.reward(["good", "bad"])]
    for item, data in zip(body["data"], expected, strict=True):
        np.testing.assert_allclose(item["data"], data, rtol=0, atol=1e-6)


def test_colbert_truncation_is_applied_not_ignored(colbert_server: Served, http: httpx.Client) -> None:
    text = "the quick brown fox jumps over the lazy dog again and again"
    body = http.post(
        f"{colbert_server.url}/pooling",
        json={"input": text, "task": "token_embed", "truncate_prompt_tokens": 5},
    ).json()
    params = PoolingParams(truncate_prompt_tokens=5)
    expected = colbert_server.engine.encode(text, "token_embed", params)[0]
    assert body["usage"]["prompt_tokens"] == expected.num_tokens == 5
    np.testing.assert_allclose(body["data"][0]["data"], expected.outputs.data, rtol=0, atol=1e-6)


def test_normalize_on_a_classifier_is_refused_not_ignored(
    classifier_server: Served, http: httpx.Client
) -> None:
    """Class probabilities are not normalised vectors: the field would change nothing."""
    response = http.post(
        f"{classifier_server.url}/pooling", json={"input": "hello", "task": "classify", "normalize": False}
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "normalize" and "its switch is use_activation" in error["message"]
