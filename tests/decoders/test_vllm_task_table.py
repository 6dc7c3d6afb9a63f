"""The rest of vLLM's pooling task table on decoders: ``token_classify`` on classifiers (the head on
every token) and ``convert="embed"`` on reward models (the backbone's LAST-token vectors)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import transformers
from decoder_remote_code import qwen2_reward_model
from tiny_decoders import TEXTS, build, build_tokenizer, normalize, softmax, tiny_config

from poolrag import LLM, Engine
from poolrag.errors import UnsupportedTaskError


@torch.no_grad()
def _per_token(backbone: torch.nn.Module, head: torch.nn.Module, ids: list[int]) -> np.ndarray:
    hidden = backbone(input_ids=torch.tensor([ids])).last_hidden_state[0]
    return head(hidden).float().numpy()


@pytest.mark.parametrize("num_labels", [1, 3])
def test_token_classify_on_a_decoder_sequence_classifier(tmp_path: Path, num_labels: int) -> None:
    model, tokenizer = build(
        tmp_path / "clf", "qwen2", transformers.AutoModelForSequenceClassification, num_labels=num_labels
    )
    llm = LLM(str(tmp_path / "clf"), convert="classify")
    assert "token_classify" in llm.supported_tasks
    outputs = llm.encode(TEXTS, pooling_task="token_classify")
    for text, out in zip(TEXTS, outputs, strict=True):
        ids = tokenizer(text)["input_ids"]
        logits = _per_token(model.model, model.score, ids)
        expected = 1 / (1 + np.exp(-logits)) if num_labels == 1 else softmax(logits)
        assert out.prompt_token_ids == ids
        np.testing.assert_allclose(out.outputs.data, expected, rtol=1e-4, atol=1e-5)
    # the last row is the sequence's own classification
    last = llm.classify(TEXTS[1])[0].outputs.probs
    np.testing.assert_allclose(outputs[1].outputs.data[-1], last, rtol=1e-4, atol=1e-5)
    # as in vLLM, the per-token task comes with convert="classify"
    assert "token_classify" not in Engine(tmp_path / "clf").supported_tasks


def test_token_classify_is_refused_where_the_head_is_not_a_classifier(tmp_path: Path) -> None:
    """A converted LLM reranker scores from lm_head rows at the last token only: no per-token rows."""
    build(tmp_path / "rr", "qwen3", transformers.AutoModelForCausalLM)
    engine = Engine(
        tmp_path / "rr", convert="classify", hf_overrides={"classifier_from_token": ["no", "yes"]}
    )
    with pytest.raises(UnsupportedTaskError):
        engine.token_classify(TEXTS[1])


def _qwen2_values(vocab_size: int) -> dict[str, Any]:
    values = tiny_config("qwen2", vocab_size).to_dict()
    for key in ("architectures", "transformers_version", "auto_map"):
        values.pop(key, None)
    return values


def test_convert_embed_on_a_reward_model_pools_its_backbone(tmp_path: Path) -> None:
    folder = tmp_path / "rm-embed"
    tokenizer = build_tokenizer(folder)
    reward_model = qwen2_reward_model(folder, _qwen2_values(len(tokenizer)))
    llm = LLM(str(folder), convert="embed", trust_remote_code=True)
    assert set(llm.supported_tasks) >= {"embed", "token_embed"}
    assert llm.engine.pooler_config.pooling_type == "LAST"
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    got = llm.embed(TEXTS)
    for text, out in zip(TEXTS, got, strict=True):
        ids = tokenizer(text)["input_ids"]
        with torch.no_grad():
            hidden = reward_model.model(input_ids=torch.tensor([ids])).last_hidden_state[0, -1].numpy()
        np.testing.assert_allclose(out.outputs.embedding, normalize(hidden), rtol=1e-4, atol=1e-5)


def test_runner_pooling_on_a_causal_lm_embeds_it_as_vllm_does(tmp_path: Path) -> None:
    """vLLM's default conversion for runner="pooling" is embed; with runner left "auto" (vLLM would
    generate) the checkpoint is still refused, naming the conversions (seen from outside: refused)."""
    from poolrag.errors import ModelLoadError

    build(tmp_path / "lm", "qwen3", transformers.AutoModelForCausalLM)
    pooled = LLM(str(tmp_path / "lm"), runner="pooling")
    assert pooled.engine_args.convert == "embed"
    converted = LLM(str(tmp_path / "lm"), convert="embed")
    got = [o.outputs.embedding for o in pooled.embed(TEXTS)]
    np.testing.assert_allclose(got, [o.outputs.embedding for o in converted.embed(TEXTS)], atol=1e-6)
    with pytest.raises(ModelLoadError, match="text-generation checkpoint; pass convert='embed'"):
        LLM(str(tmp_path / "lm"))
