"""``huggingface_hub``'s ``InferenceClient`` against ``poolrag serve`` as against Text Embeddings
Inference: given the server's URL it posts TEI's bodies to ``/`` (``feature_extraction``,
``sentence_similarity``, ``text_classification``), or to the route its URL names; vectors and
scores equal the engine's (issue 45 item 9)."""

from __future__ import annotations

import httpx
import huggingface_hub.constants
import numpy as np
import pytest
from huggingface_hub import InferenceClient
from huggingface_hub.errors import HfHubHTTPError

from poolrag import PoolingParams
from poolrag.server import ServerSettings
from poolrag.server.app import create_models_app
from poolrag.testing.live_server import LiveServer

from .conftest import Served

TEXTS = ["A cat sat on the mat.", "Stock markets fell sharply on Monday.", "Paris is the capital of France."]
#: About 330 tokens: over MiniLM's 256, as the long paragraphs a corpus holds.
LONG = "The committee reviewed the proposal in great detail before it voted. " * 30
QUERY = "Where does the cat sit?"


@pytest.fixture(autouse=True)
def _local_calls_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """huggingface_hub refuses every request under the suite's HF_HUB_OFFLINE=1, a local server's
    too; these go to 127.0.0.1 only."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)


def test_feature_extraction_gets_the_engines_vectors(minilm_server: Served) -> None:
    engine = minilm_server.engine
    client = InferenceClient(base_url=minilm_server.url)
    np.testing.assert_allclose(client.feature_extraction(TEXTS), engine.embed_array(TEXTS), atol=1e-6, rtol=0)
    one = client.feature_extraction(TEXTS[0])
    np.testing.assert_allclose(one, engine.embed_array(TEXTS[:1]), atol=1e-6, rtol=0)
    raw = client.feature_extraction(TEXTS, normalize=False)
    np.testing.assert_allclose(raw, engine.embed_array(TEXTS, PoolingParams(normalize=False)), atol=1e-5)
    cut = engine.embed_array([LONG], PoolingParams(truncate=True))
    np.testing.assert_allclose(client.feature_extraction([LONG], truncate=True), cut, atol=1e-6, rtol=0)
    # the client's encoding_format goes in the body; TEI answers floats whatever it says, as here
    for encoding in ("float", "base64"):
        got = client.feature_extraction(TEXTS, encoding_format=encoding)
        np.testing.assert_allclose(got, engine.embed_array(TEXTS), atol=1e-6, rtol=0)
    named = InferenceClient(base_url=f"{minilm_server.url}/embed")  # a URL naming TEI's route
    np.testing.assert_allclose(named.feature_extraction(TEXTS), engine.embed_array(TEXTS), atol=1e-6, rtol=0)


def test_sentence_similarity_is_the_engines_score(minilm_server: Served) -> None:
    client = InferenceClient(base_url=minilm_server.url)
    expected = [out.outputs.score for out in minilm_server.engine.score(QUERY, TEXTS)]
    np.testing.assert_allclose(client.sentence_similarity(QUERY, other_sentences=TEXTS), expected, atol=1e-6)


def test_text_classification_gets_the_best_label_and_score(
    classifier_server: Served, cross_encoder_server: Served
) -> None:
    for served in (classifier_server, cross_encoder_server):
        probs = served.engine.classify(TEXTS[:1])[0].outputs.probs
        best = int(np.argmax(probs))
        # TEI answers one text with a flat list, best first; the client keeps its first element
        got = InferenceClient(base_url=served.url).text_classification(TEXTS[0])
        assert got.label == served.engine.id2label[best]
        assert got.score == pytest.approx(float(probs[best]), abs=1e-6)


def test_text_classification_reaches_the_classifier_served_after_a_reranker(
    minilm_engine, cross_encoder_engine, classifier_engine
) -> None:
    """An embedder, its reranker and a topic classifier in one server, in that order: the client's
    one text goes to the classifier, not to the reranker that comes first (a cross-encoder can
    classify one text, but it scores pairs); its query-passage pairs still reach the reranker."""
    app = create_models_app(
        [
            (minilm_engine, ServerSettings(served_model_names=("embedder",))),
            (cross_encoder_engine, ServerSettings(served_model_names=("reranker",))),
            (classifier_engine, ServerSettings(served_model_names=("topics",))),
        ]
    )
    probs = classifier_engine.classify(TEXTS[:1])[0].outputs.probs
    with LiveServer(app) as live:
        got = InferenceClient(base_url=live.url).text_classification(TEXTS[0])
        ranked = httpx.post(f"{live.url}/rerank", json={"query": QUERY, "texts": TEXTS}, timeout=60)
    assert got.label == classifier_engine.id2label[int(np.argmax(probs))]
    assert got.score == pytest.approx(float(probs.max()), abs=1e-6)
    logits = [
        out.outputs.score
        for out in cross_encoder_engine.score(QUERY, TEXTS, PoolingParams(use_activation=False))
    ]
    best = int(np.argmax(logits))
    assert ranked.json()[0]["index"] == best
    assert ranked.json()[0]["score"] == pytest.approx(1 / (1 + np.exp(-logits[best])), abs=1e-6)


def test_feature_extraction_on_a_reranker_fails_as_teis_validation_error(
    cross_encoder_server: Served,
) -> None:
    """A cross-encoder's ``/`` reranks, as TEI's does: ``feature_extraction``'s body (one text, or a
    list of texts) is TEI's 422 saying the model gives no embeddings. It was read as ``/predict``'s,
    whose labels the client failed to parse (``TypeError``), two texts scored as one pair."""
    client = InferenceClient(base_url=cross_encoder_server.url)
    for texts in (TEXTS[0], TEXTS[:2], TEXTS):
        with pytest.raises(HfHubHTTPError) as failed:
            client.feature_extraction(texts)
        assert failed.value.response.status_code == 422
        error = failed.value.response.json()
        assert error["error_type"] == "Validation"
        assert "gives no embeddings" in error["error"]
    # the classification the same route takes: text_classification's body
    probs = cross_encoder_server.engine.classify(TEXTS[:1])[0].outputs.probs
    assert client.text_classification(TEXTS[0]).score == pytest.approx(float(probs.max()), abs=1e-6)


def test_a_route_the_model_does_not_run_fails_as_tei_does(classifier_server: Served) -> None:
    with pytest.raises(HfHubHTTPError) as failed:
        InferenceClient(base_url=f"{classifier_server.url}/embed").feature_extraction(TEXTS[0])
    assert failed.value.response.status_code == 424
    assert failed.value.response.json()["error_type"] == "Backend"


def test_text_classification_beside_an_embedder_reaches_the_classifier(
    minilm_server: Served, minilm_engine, classifier_engine
) -> None:
    """The client names no model and posts to ``/``: an embedder alone says it cannot classify (it
    was '422 parameters: not a field this server takes'); served beside a classifier, the
    classifier answers."""
    with pytest.raises(HfHubHTTPError) as failed:
        InferenceClient(base_url=minilm_server.url).text_classification(TEXTS[0])
    assert failed.value.response.status_code == 424
    assert "classify" in failed.value.response.json()["error"]
    app = create_models_app(
        [
            (minilm_engine, ServerSettings(served_model_names=("embedder",))),
            (classifier_engine, ServerSettings(served_model_names=("topics",))),
        ]
    )
    probs = classifier_engine.classify(TEXTS[:1])[0].outputs.probs
    with LiveServer(app) as live:
        got = InferenceClient(base_url=live.url).text_classification(TEXTS[0])
        vectors = InferenceClient(base_url=live.url).feature_extraction(TEXTS)
    assert got.label == classifier_engine.id2label[int(np.argmax(probs))]
    assert got.score == pytest.approx(float(probs.max()), abs=1e-6)
    np.testing.assert_allclose(vectors, minilm_engine.embed_array(TEXTS), atol=1e-6, rtol=0)
