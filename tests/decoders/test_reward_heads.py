"""Reward heads found by name (InternLM2's ``v_head``), PRMs without a step tag, and ``convert='embed'``
on a remote-code reward model: each against the checkpoint's own forward."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers
from decoder_remote_code import internlm2_reward_model, qwen2_reward_model
from test_decoder_rewards import STEPS, _config_values
from tiny_decoders import PAD, SIDES, TEXTS, build_tokenizer, normalize, run_padded, softmax
from torch import nn

from poolrag import Engine
from poolrag.errors import ModelLoadError
from poolrag.loading.decoder_loader import find_head


@pytest.fixture(scope="module")
def internlm2_rm(tmp_path_factory):
    folder = tmp_path_factory.mktemp("internlm2-rm")
    tokenizer = build_tokenizer(folder)
    model = internlm2_reward_model(folder, _config_values(len(tokenizer), "llama"))
    return model, transformers.AutoTokenizer.from_pretrained(folder), folder


@pytest.mark.parametrize("side", SIDES)
def test_internlm2_reward_model_reads_its_v_head(internlm2_rm, side):
    model, tokenizer, folder = internlm2_rm
    engine = Engine(folder, trust_remote_code=True)
    assert engine.spec.architecture == "InternLM2ForRewardModel" and engine.spec.num_labels == 1
    seqs = [tokenizer(t)["input_ids"] for t in TEXTS]
    expected = run_padded(model, seqs, PAD, side, lambda out, batch, last: out.logits.float().numpy())
    got = np.stack([r.outputs.data for r in engine.reward(TEXTS)])
    assert got.shape == (len(TEXTS), 1)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_heads_are_found_by_name_and_frozen():
    class Classifier(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = nn.Linear(2, 2)
            self.classifier = nn.Linear(2, 1)

    head = find_head(Classifier(), "Classifier")
    assert isinstance(head, nn.Linear) and not any(p.requires_grad for p in head.parameters())
    with pytest.raises(ModelLoadError, match="v_head"):
        find_head(nn.Module(), "Headless")


@pytest.fixture(scope="module")
def qwen2_prm(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qwen2-prm")
    tokenizer = build_tokenizer(folder)
    model = qwen2_reward_model(folder, _config_values(len(tokenizer)), process=True)
    return model, transformers.AutoTokenizer.from_pretrained(folder), folder


def test_process_reward_model_without_step_tag_scores_every_token(qwen2_prm):
    """vLLM's default for Qwen2ForProcessRewardModel: one softmaxed row per token."""
    model, tokenizer, folder = qwen2_prm
    engine = Engine(folder, trust_remote_code=True)
    got = [r.outputs.data for r in engine.reward(STEPS)]
    for text, rows in zip(STEPS, got, strict=True):
        ids = torch.tensor([tokenizer(text)["input_ids"]])
        with torch.no_grad():
            logits = model(ids).logits[0]
        assert rows.shape == (ids.shape[1], 2)
        np.testing.assert_allclose(rows, softmax(logits.numpy()), rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def qwen2_rm(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qwen2-rm-embed")
    tokenizer = build_tokenizer(folder)
    model = qwen2_reward_model(folder, _config_values(len(tokenizer)))
    return model, transformers.AutoTokenizer.from_pretrained(folder), folder


@pytest.mark.parametrize("side", SIDES)
def test_convert_embed_on_a_remote_reward_model_pools_its_backbone(qwen2_rm, side):
    model, tokenizer, folder = qwen2_rm
    engine = Engine(folder, trust_remote_code=True, convert="embed")
    assert engine.supported_tasks[0] == "embed"
    seqs = [tokenizer(t)["input_ids"] for t in TEXTS]

    def last_state(out, batch, last):
        return out.last_hidden_state[torch.arange(len(last)), last].float().numpy()

    expected = normalize(run_padded(model.model, seqs, PAD, side, last_state))
    got = np.stack([r.outputs.embedding for r in engine.embed(TEXTS)])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_all_pooling_gives_vllms_per_token_rewards_whose_last_row_is_the_sequence_reward(internlm2_rm):
    """vLLM pools every token of a ``*ForRewardModel``; ``pooling_type="ALL"`` gives those rows."""
    _, tokenizer, folder = internlm2_rm
    per_text = Engine(folder, trust_remote_code=True).reward(TEXTS)
    per_token = Engine(folder, trust_remote_code=True, pooler_config='{"pooling_type": "ALL"}').reward(TEXTS)
    for text, one, rows in zip(TEXTS, per_text, per_token, strict=True):
        assert rows.outputs.data.shape == (len(tokenizer(text)["input_ids"]), 1)
        np.testing.assert_allclose(rows.outputs.data[-1], one.outputs.data, rtol=1e-5, atol=1e-6)
