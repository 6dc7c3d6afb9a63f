"""``poolrag.LLM`` returns vLLM's output types; ``Engine`` keeps numpy.

Issue 30, item 1: "``outputs.embedding`` and ``outputs.probs`` are numpy arrays where vLLM returns
``list[float]``; ``outputs.data`` is numpy where vLLM returns a ``torch.Tensor``; no ``finished``.
``json.dumps(output.outputs.embedding)`` raises, ``data.cpu()`` raises, and ``embedding + [0.0]``
silently adds element-wise instead of concatenating."
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from poolrag import LLM, Engine
from poolrag.testing.tiny_models import SENTENCES
from poolrag.vllm_outputs import (
    ClassificationRequestOutput,
    EmbeddingOutput,
    EmbeddingRequestOutput,
    PoolingOutput,
    PoolingRequestOutput,
    ScoringRequestOutput,
)


@pytest.fixture(scope="module")
def llm(minilm_path: Path) -> LLM:
    return LLM(str(minilm_path), runner="pooling")


def test_embed_gives_a_list_of_floats_as_vllm_does(llm: LLM, minilm_engine: Engine) -> None:
    (out,) = llm.embed(SENTENCES[0])
    embedding = out.outputs.embedding
    assert type(embedding) is list and all(type(x) is float for x in embedding)
    assert out.finished is True and isinstance(out, PoolingRequestOutput)
    assert json.loads(json.dumps(embedding)) == embedding
    assert embedding + [0.0] == [*embedding, 0.0]  # noqa: RUF005  (vLLM code concatenates; numpy would add)
    assert out.outputs.hidden_size == 384
    # the Engine keeps its numpy fast path, with the same numbers
    engine_out = minilm_engine.embed(SENTENCES[0])[0]
    assert isinstance(engine_out.outputs.embedding, np.ndarray)
    np.testing.assert_allclose(embedding, engine_out.outputs.embedding, rtol=0, atol=1e-6)
    assert isinstance(minilm_engine.embed_array(SENTENCES[:2]), np.ndarray)


def test_encode_gives_a_tensor_as_vllm_does(llm: LLM, minilm_engine: Engine) -> None:
    (out,) = llm.encode(SENTENCES[1], pooling_task="token_embed")
    data = out.outputs.data
    assert isinstance(data, torch.Tensor) and data.dtype == torch.float32
    assert tuple(data.cpu().shape) == (len(out.prompt_token_ids), 384)
    expected = minilm_engine.encode(SENTENCES[1], "token_embed")[0].outputs.data
    torch.testing.assert_close(data, torch.from_numpy(expected), rtol=0, atol=1e-6)
    data.mul_(0)  # the tensor is the caller's own: writing to it changes nothing in the engine
    again = llm.encode(SENTENCES[1], pooling_task="token_embed")[0].outputs.data
    assert float(again.abs().sum()) > 0


def test_score_and_request_fields(llm: LLM) -> None:
    scores = llm.score("What is pooling?", SENTENCES[:2])
    assert all(type(s.outputs.score) is float and s.finished for s in scores)
    assert all(isinstance(s, ScoringRequestOutput) for s in scores)
    (out,) = llm.embed(SENTENCES[2])
    assert out.prompt_token_ids and out.num_tokens == len(out.prompt_token_ids)
    assert isinstance(out, EmbeddingRequestOutput) and out.error is None


def test_a_vector_prints_its_size_not_its_floats(llm: LLM) -> None:
    """vLLM's repr: logging an output does not write 384 floats per line."""
    (out,) = llm.embed(SENTENCES[0])
    assert repr(out.outputs) == "EmbeddingOutput(hidden_size=384)"
    assert len(repr(out)) < 400


def test_classify_and_reward_as_vllm_types(tiny_model: Callable[..., Path]) -> None:
    classifier = LLM(str(tiny_model("bert", head="sequence", num_labels=3)))
    (out,) = classifier.classify(SENTENCES[0])
    probs = out.outputs.probs
    assert type(probs) is list and len(probs) == out.outputs.num_classes == 3
    assert sum(probs) == pytest.approx(1.0, abs=1e-5) and out.finished
    assert isinstance(out, ClassificationRequestOutput)
    assert repr(out.outputs) == "ClassificationOutput(num_classes=3)"
    tagger = LLM(str(tiny_model("bert", head="token", num_labels=2)), convert="reward")
    (reward,) = tagger.reward(SENTENCES[0])
    assert isinstance(reward.outputs.data, torch.Tensor)
    assert tuple(reward.outputs.data.shape) == (len(reward.prompt_token_ids), 2)


def test_built_positionally_in_vllm_constructor_order() -> None:
    """vLLM's constructor is ``(request_id, outputs, prompt_token_ids, num_cached_tokens, finished)``;
    a wrapper or test double written against it builds the same object here."""
    out = EmbeddingRequestOutput("r1", EmbeddingOutput([0.5, 0.5]), [101, 102], 7, False)
    assert (out.request_id, out.prompt_token_ids, out.num_cached_tokens, out.finished) == (
        "r1",
        [101, 102],
        7,
        False,
    )
    assert out.prompt is None and out.outputs.embedding == [0.5, 0.5]


def test_pooling_outputs_compare_by_their_data_as_vllms_do(llm: LLM) -> None:
    """vLLM's ``PoolingOutput`` defines ``==`` over every element; a dataclass's generated one asked a
    multi-element tensor for one truth value, a ``RuntimeError`` in a script comparing two runs."""
    first, again = (llm.encode(SENTENCES[0], pooling_task="token_embed")[0].outputs for _ in range(2))
    other = llm.encode(SENTENCES[1], pooling_task="token_embed")[0].outputs
    assert first == again
    assert first != other  # another text (another token count: unequal, not a broadcasting error)
    assert first != PoolingOutput(first.data + 1)
    assert first != "a string"
