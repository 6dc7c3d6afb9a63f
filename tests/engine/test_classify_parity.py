"""`classify`, `score` (cross-encoder) and `token_classify` equal transformers / CrossEncoder."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers
from sentence_transformers import CrossEncoder
from tiny_models import ENCODER_ARCHS, SENTENCES

from poolrag import Engine, PoolingParams
from poolrag.errors import InvalidInputError, UnsupportedTaskError


def _reference_logits(folder, auto_class, texts, pairs=None) -> list[np.ndarray]:
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = auto_class.from_pretrained(folder).eval()
    out = []
    with torch.no_grad():
        for i, text in enumerate(texts):  # unpadded, one at a time: the ground truth
            enc = (
                tokenizer(text, pairs[i], return_tensors="pt")
                if pairs
                else tokenizer(text, return_tensors="pt")
            )
            enc = {
                k: v
                for k, v in enc.items()
                if k != "token_type_ids" or "token_type_ids" in tokenizer.model_input_names
            }
            out.append(model(**enc).logits[0].numpy())
    return out


@pytest.mark.parametrize("arch", ENCODER_ARCHS)
def test_sequence_classification_matches_transformers(tiny_model, arch: str) -> None:
    folder = tiny_model(arch, head="sequence", num_labels=3)
    engine = Engine(folder)
    assert engine.supported_tasks == ("classify",)
    logits = _reference_logits(folder, transformers.AutoModelForSequenceClassification, SENTENCES)
    probs = [out.outputs.probs for out in engine.classify(SENTENCES)]
    for ours, ref in zip(probs, logits, strict=True):
        np.testing.assert_allclose(ours, torch.softmax(torch.from_numpy(ref), -1).numpy(), atol=1e-5)
        assert ours.sum() == pytest.approx(1.0, abs=1e-5)
    raw = engine.classify(SENTENCES, PoolingParams(use_activation=False))
    for ours, ref in zip(raw, logits, strict=True):
        np.testing.assert_allclose(ours.outputs.probs, ref, atol=1e-5)


@pytest.mark.parametrize("arch", ENCODER_ARCHS)
def test_cross_encoder_score_matches_crossencoder_predict(tiny_model, arch: str) -> None:
    folder = tiny_model(arch, head="sequence", num_labels=1)
    engine = Engine(folder)
    assert set(engine.supported_tasks) == {"classify", "score", "reward"}
    query, docs = "what do pooling models do?", SENTENCES
    reference = CrossEncoder(str(folder), device="cpu").predict([(query, d) for d in docs])
    ours = [out.outputs.score for out in engine.score(query, docs)]
    np.testing.assert_allclose(ours, reference, atol=1e-5)
    # N:N pairs, zipped
    pairs = engine.score(docs, list(reversed(docs)))
    reference_pairs = CrossEncoder(str(folder), device="cpu").predict(
        list(zip(docs, reversed(docs), strict=True))
    )
    np.testing.assert_allclose([p.outputs.score for p in pairs], reference_pairs, atol=1e-5)


@pytest.mark.parametrize("arch", ENCODER_ARCHS)
def test_pairs_through_a_classifier_of_several_labels_match_crossencoder_predict(
    tiny_model, arch: str
) -> None:
    """An NLI model's pairs: every label's probability, as ``CrossEncoder.predict(apply_softmax=True)``
    gives it; ``score`` wants one label and refuses this model."""
    folder = tiny_model(arch, head="sequence", num_labels=3)
    engine = Engine(folder)
    premises, hypotheses = SENTENCES, list(reversed(SENTENCES))
    cross_encoder = CrossEncoder(str(folder), device="cpu")
    reference = cross_encoder.predict(list(zip(premises, hypotheses, strict=True)), apply_softmax=True)
    ours = engine.classify_pairs(premises, hypotheses)
    np.testing.assert_allclose([out.outputs.probs for out in ours], reference, atol=1e-5)
    raw = engine.classify_pairs(premises, hypotheses, PoolingParams(use_activation=False))
    logits = cross_encoder.predict(list(zip(premises, hypotheses, strict=True)))
    np.testing.assert_allclose([out.outputs.probs for out in raw], logits, atol=1e-5)
    one_to_many = engine.classify_pairs(premises[0], hypotheses)  # 1:N, as score pairs them
    np.testing.assert_allclose(
        [out.outputs.probs for out in one_to_many],
        cross_encoder.predict([(premises[0], h) for h in hypotheses], apply_softmax=True),
        atol=1e-5,
    )
    with pytest.raises(UnsupportedTaskError):
        engine.score(premises, hypotheses)


def test_pairs_are_refused_by_a_model_that_reads_single_texts(tiny_model) -> None:
    engine = Engine(tiny_model("bert", head="token", num_labels=3))
    with pytest.raises(UnsupportedTaskError, match="classify"):
        engine.classify_pairs("a premise", "a hypothesis")


def test_reward_of_a_one_label_classifier_is_the_raw_logit(tiny_model) -> None:
    folder = tiny_model("bert", head="sequence", num_labels=1)
    logits = _reference_logits(folder, transformers.AutoModelForSequenceClassification, SENTENCES)
    engine = Engine(folder)
    rewards = engine.reward(SENTENCES)
    for out, ref in zip(rewards, logits, strict=True):
        np.testing.assert_allclose(out.outputs.data, ref, atol=1e-5)
    raw = engine.reward(SENTENCES, PoolingParams(use_activation=False))
    np.testing.assert_array_equal([o.outputs.data for o in raw], [o.outputs.data for o in rewards])
    # switching on what does not exist is refused (seen from outside: ignored, the raw value returned)
    with pytest.raises(
        InvalidInputError, match="use_activation: this reward model's reward is its head's raw"
    ):
        engine.reward(SENTENCES, PoolingParams(use_activation=True))
    with pytest.raises(InvalidInputError, match="step_tag_id and returned_token_ids apply to rewards"):
        engine.classify(SENTENCES, PoolingParams(step_tag_id=5))


@pytest.mark.parametrize("arch", ENCODER_ARCHS)
def test_token_classification_matches_transformers(tiny_model, arch: str) -> None:
    folder = tiny_model(arch, head="token", num_labels=5)
    engine = Engine(folder)
    assert engine.supported_tasks == ("token_classify", "reward")  # reward: vLLM's per-token LLM.reward
    logits = _reference_logits(folder, transformers.AutoModelForTokenClassification, SENTENCES)
    outputs = engine.token_classify(SENTENCES)
    for out, ref in zip(outputs, logits, strict=True):
        assert out.outputs.data.shape == (out.num_tokens, 5)
        np.testing.assert_allclose(
            out.outputs.data, torch.softmax(torch.from_numpy(ref), -1).numpy(), atol=1e-5
        )
