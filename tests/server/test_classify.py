"""POST /classify: label, probabilities and class count per input, as ``engine.classify``."""

from __future__ import annotations

import httpx
import numpy as np

from poolrag import PoolingParams

from .conftest import Served

TEXTS = ["The match ended in a draw.", "Parliament passed the bill.", "Electrons carry charge."]


def test_multi_label_probs_and_labels_equal_offline(classifier_server: Served, http: httpx.Client) -> None:
    body = http.post(f"{classifier_server.url}/classify", json={"input": TEXTS}).json()
    expected = [out.outputs.probs for out in classifier_server.engine.classify(TEXTS)]
    labels = ["sports", "politics", "science"]
    for i, (item, probs) in enumerate(zip(body["data"], expected, strict=True)):
        assert item["index"] == i
        assert item["num_classes"] == 3
        np.testing.assert_allclose(item["probs"], probs, rtol=0, atol=1e-6)
        assert item["label"] == labels[int(np.argmax(probs))]
    # multi-label: independent sigmoids, not a distribution
    assert all(0 < p < 1 for item in body["data"] for p in item["probs"])
    tokens = sum(out.num_tokens for out in classifier_server.engine.classify(TEXTS))
    assert body["usage"]["prompt_tokens"] == tokens


def test_use_activation_false_returns_logits(classifier_server: Served, http: httpx.Client) -> None:
    body = http.post(
        f"{classifier_server.url}/classify", json={"input": TEXTS[0], "use_activation": False}
    ).json()
    logits = classifier_server.engine.classify(TEXTS[0], PoolingParams(use_activation=False))[0].outputs.probs
    np.testing.assert_allclose(body["data"][0]["probs"], logits, rtol=0, atol=1e-6)


def test_token_id_input_classifies_like_its_text(classifier_server: Served, http: httpx.Client) -> None:
    ids = classifier_server.engine.tokenize(TEXTS[2])
    by_ids = http.post(f"{classifier_server.url}/classify", json={"input": [ids]}).json()
    by_text = http.post(f"{classifier_server.url}/classify", json={"input": TEXTS[2]}).json()
    assert by_ids["data"][0]["probs"] == by_text["data"][0]["probs"]


def test_cross_encoder_classifies_with_one_class(cross_encoder_server: Served, http: httpx.Client) -> None:
    body = http.post(f"{cross_encoder_server.url}/classify", json={"input": "a sentence"}).json()
    expected = cross_encoder_server.engine.classify("a sentence")[0].outputs.probs
    assert body["data"][0]["num_classes"] == 1
    np.testing.assert_allclose(body["data"][0]["probs"], expected, rtol=0, atol=1e-6)
