"""`classify`, `score` (cross-encoder) and `token_classify` equal transformers / CrossEncoder."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers
from sentence_transformers import CrossEncoder

from poolrag import Engine, PoolingParams
from poolrag.errors import InvalidInputError, UnsupportedTaskError
from poolrag.testing.tiny_models import ENCODER_ARCHS, SENTENCES


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
    """An NLI model's pairs: every label's score as ``CrossEncoder.predict`` gives it (the logits
    of a folder no CrossEncoder saved, where ``classify`` takes vLLM's softmax); ``score`` wants
    one label and refuses this model."""
    folder = tiny_model(arch, head="sequence", num_labels=3)
    engine = Engine(folder)
    premises, hypotheses = SENTENCES, list(reversed(SENTENCES))
    cross_encoder = CrossEncoder(str(folder), device="cpu")
    reference = cross_encoder.predict(list(zip(premises, hypotheses, strict=True)))
    ours = engine.classify_pairs(premises, hypotheses)
    np.testing.assert_allclose([out.outputs.probs for out in ours], reference, atol=1e-5)
    raw = engine.classify_pairs(premises, hypotheses, PoolingParams(use_activation=False))
    np.testing.assert_allclose([out.outputs.probs for out in raw], reference, atol=1e-5)
    one_to_many = engine.classify_pairs(premises[0], hypotheses)  # 1:N, as score pairs them
    np.testing.assert_allclose(
        [out.outputs.probs for out in one_to_many],
        cross_encoder.predict([(premises[0], h) for h in hypotheses]),
        atol=1e-5,
    )
    assert engine.classify_activation == "softmax"
    with pytest.raises(UnsupportedTaskError):
        engine.score(premises, hypotheses)


@pytest.mark.parametrize(
    ("num_labels", "saved", "config"),
    [
        (3, torch.nn.Sigmoid(), {}),
        (3, torch.nn.Softmax(dim=-1), {}),
        (3, None, {}),  # sentence-transformers saves its default, Identity
        (1, None, {}),  # Sigmoid saved
        (1, torch.nn.Tanh(), {}),
        (1, "unsaved", {"problem_type": "regression"}),  # classify gives the value, predict a sigmoid
        (3, "unsaved", {"problem_type": "multi_label_classification"}),  # classify: sigmoids
    ],
)
def test_classify_pairs_applies_what_crossencoder_predict_applies(
    tiny_model, tmp_path, num_labels: int, saved: object, config: dict[str, str]
) -> None:
    """On a folder a CrossEncoder saved (its activation_fn) and on a plain transformers folder."""
    folder = tiny_model("bert", head="sequence", num_labels=num_labels, **config)
    if saved != "unsaved":
        options = {} if saved is None else {"activation_fn": saved}
        CrossEncoder(str(folder), device="cpu", **options).save(str(tmp_path / "saved"))
        folder = tmp_path / "saved"
    pairs = list(zip(SENTENCES, reversed(SENTENCES), strict=True))
    reference = CrossEncoder(str(folder), device="cpu").predict(pairs)
    ours = Engine(folder).classify_pairs([p for p, _ in pairs], [h for _, h in pairs])
    np.testing.assert_allclose(
        np.array([out.outputs.probs for out in ours]).reshape(reference.shape), reference, atol=1e-5
    )


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


def test_a_one_label_token_classifier_gives_each_tokens_sigmoid(tiny_model) -> None:
    """A softmax over one column is 1.0 for every token; vLLM's token head takes the sigmoid there."""
    folder = tiny_model("bert", head="token", num_labels=1)
    logits = _reference_logits(folder, transformers.AutoModelForTokenClassification, SENTENCES)
    for out, ref in zip(Engine(folder).token_classify(SENTENCES), logits, strict=True):
        np.testing.assert_allclose(out.outputs.data, torch.sigmoid(torch.from_numpy(ref)).numpy(), atol=1e-6)


def test_a_regression_heads_class_is_its_value_and_its_score_a_probability(tiny_model) -> None:
    """As vLLM: ``classify`` follows transformers' ``problem_type`` (a regression's loss applies
    nothing), ``score`` is a cross-encoder's probability whatever the head was trained for."""
    folder = tiny_model("bert", head="sequence", num_labels=1, problem_type="regression")
    engine = Engine(folder)
    pairs = [(SENTENCES[0], s) for s in SENTENCES[1:3]]
    (logit,) = _reference_logits(folder, transformers.AutoModelForSequenceClassification, SENTENCES[:1])
    np.testing.assert_allclose(engine.classify(SENTENCES[:1])[0].outputs.probs, logit, atol=1e-6)
    pair_logits = _reference_logits(
        folder,
        transformers.AutoModelForSequenceClassification,
        [q for q, _ in pairs],
        [d for _, d in pairs],
    )
    scores = [s.outputs.score for s in engine.score(SENTENCES[0], [d for _, d in pairs])]
    expected = torch.sigmoid(torch.from_numpy(np.array(pair_logits))).numpy().ravel()
    np.testing.assert_allclose(scores, expected, atol=1e-6)
    assert engine.classify_activation == "identity"


def test_returned_token_ids_are_checked_before_the_batch(tiny_model) -> None:
    """A column past the head (or a negative one, which would count from the end) is the caller's
    error, raised before the request joins work other callers share."""
    engine = Engine(tiny_model("bert", head="token", num_labels=5))
    for bad in ([9], [-1], []):
        with pytest.raises(InvalidInputError, match=r"ids in \[0, 5\)") as refused:
            engine.token_classify(SENTENCES[:1], PoolingParams(returned_token_ids=bad))
        assert refused.value.param == "returned_token_ids"
    columns = PoolingParams(returned_token_ids=[4, 0], use_activation=False)
    (picked,) = engine.token_classify(SENTENCES[:1], columns)
    (whole,) = engine.token_classify(SENTENCES[:1], PoolingParams(use_activation=False))
    np.testing.assert_array_equal(picked.outputs.data, whole.outputs.data[:, [4, 0]])


def test_a_boolean_pooler_activation_is_vllms_use_activation(tiny_model) -> None:
    """vLLM's older pooler_config ``activation`` is a boolean; poolrag's names a function. A
    boolean switches the activation, a name must be one poolrag applies."""
    folder = tiny_model("bert", head="sequence", num_labels=3)
    (logits,) = _reference_logits(folder, transformers.AutoModelForSequenceClassification, SENTENCES[:1])
    off = Engine(folder, pooler_config={"activation": False}).classify(SENTENCES[:1])[0].outputs.probs
    np.testing.assert_allclose(off, logits, atol=1e-6)
    on = Engine(folder, pooler_config={"activation": True}).classify(SENTENCES[:1])[0].outputs.probs
    np.testing.assert_allclose(on, torch.softmax(torch.from_numpy(logits), -1).numpy(), atol=1e-6)
    for bad in ("relu", "Softmax"):
        with pytest.raises(InvalidInputError, match="activation must be one of softmax, sigmoid, identity"):
            Engine(folder, pooler_config={"activation": bad})
    with pytest.raises(InvalidInputError, match="activation and use_activation disagree"):
        Engine(folder, pooler_config={"activation": True, "use_activation": False})
    # on an embedder vLLM's boolean meant nothing (its switch is normalize): refused, not normalisation
    with pytest.raises(InvalidInputError, match="its switch is normalize"):
        Engine(tiny_model("bert"), pooler_config={"activation": False})
