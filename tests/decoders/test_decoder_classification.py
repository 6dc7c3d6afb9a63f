"""Decoder classifiers and sequence reward models: the head read at the last real token."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers
from tiny_decoders import EOS, PAD, SIDES, TEXTS, build, ref_last_hidden, ref_sequence_logits, softmax

from poolrag import Engine, PoolingParams

CLASSIFIERS = {
    "qwen2": "Qwen2ForSequenceClassification",
    "llama": "LlamaForSequenceClassification",
    "gpt2": "GPT2ForSequenceClassification",
    "gemma": "GemmaForSequenceClassification",
}
LABELS = {0: "negative", 1: "neutral", 2: "positive"}


@pytest.fixture(scope="module", params=sorted(CLASSIFIERS))
def classifier(request, tmp_path_factory):
    family = request.param
    folder = tmp_path_factory.mktemp(f"{family}-cls")
    model, tokenizer = build(
        folder, family, transformers.AutoModelForSequenceClassification, num_labels=3, id2label=LABELS
    )
    assert type(model).__name__ == CLASSIFIERS[family]
    return model, tokenizer, Engine(folder)


@pytest.mark.parametrize("side", SIDES)
def test_classify_matches_transformers_whatever_the_padding(classifier, side):
    model, tokenizer, engine = classifier
    assert engine.supported_tasks == ("classify",) and engine.id2label == LABELS
    seqs = [tokenizer(t)["input_ids"] for t in TEXTS]
    expected = softmax(ref_sequence_logits(model, seqs, PAD, side))
    got = np.stack([o.outputs.probs for o in engine.classify(TEXTS)])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    raw = np.stack([o.outputs.probs for o in engine.classify(TEXTS, PoolingParams(use_activation=False))])
    np.testing.assert_allclose(raw, ref_sequence_logits(model, seqs, PAD, side), rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module", params=["qwen2", "llama", "gpt2", "gemma"])
def reward_model(request, tmp_path_factory):
    """A sequence reward model: a one-label *ForSequenceClassification."""
    folder = tmp_path_factory.mktemp(f"{request.param}-rm")
    model, tokenizer = build(
        folder, request.param, transformers.AutoModelForSequenceClassification, num_labels=1
    )
    return model, tokenizer, Engine(folder)


@pytest.mark.parametrize("side", ["left", None])
def test_sequence_reward_model_returns_one_raw_score_per_text(reward_model, side):
    model, tokenizer, engine = reward_model
    assert set(engine.supported_tasks) == {"classify", "score", "reward"}
    seqs = [tokenizer(t)["input_ids"] for t in TEXTS]
    expected = ref_sequence_logits(model, seqs, PAD, side)
    rewards = engine.reward(TEXTS)
    assert all(r.outputs.data.shape == (1,) for r in rewards)
    np.testing.assert_allclose(np.stack([r.outputs.data for r in rewards]), expected, rtol=1e-5, atol=1e-5)


def test_one_label_decoder_scores_pairs_like_a_cross_encoder(reward_model):
    model, tokenizer, engine = reward_model
    assert engine.score_kind == "cross-encoder"
    query, docs = "What is a panda?", TEXTS
    seqs = [tokenizer(query, d)["input_ids"] for d in docs]
    expected = 1 / (1 + np.exp(-ref_sequence_logits(model, seqs, PAD, "right")[:, 0]))
    got = [o.outputs.score for o in engine.score(query, docs)]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_last_token_is_read_even_when_pad_is_eos_and_the_text_ends_in_eos(tmp_path):
    """transformers searches for the last non-pad token; with pad == eos and a trailing eos it reads
    the token before the eos. poolrag reads the real last token, the one the model was run to."""
    model, tokenizer = build(
        tmp_path,
        "qwen2",
        transformers.AutoModelForSequenceClassification,
        tokenizer_kwargs={"add_eos": True, "pad_token": "</s>"},
        pad_id=EOS,
        num_labels=1,
    )
    engine = Engine(tmp_path)
    seqs = [tokenizer(t)["input_ids"] for t in TEXTS]
    assert all(s[-1] == EOS for s in seqs) and tokenizer.pad_token_id == EOS
    hand = ref_last_hidden(model.model, seqs, EOS, None) @ model.score.weight.detach().numpy().T
    got = np.stack([r.outputs.data for r in engine.reward(TEXTS)])
    np.testing.assert_allclose(got, hand, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        misread = ref_sequence_logits(model, seqs, EOS, None)
    assert not np.allclose(misread, hand, atol=1e-3)  # the pitfall this avoids is real
