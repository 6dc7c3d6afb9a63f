"""Text Embeddings Inference's own API on ``poolrag serve``: ``/embed``, ``/embed_all``,
``/similarity``, ``/predict``, ``/rerank`` with ``texts``, ``/tokenize`` with ``inputs``, ``/decode``,
``/info`` and ``POST /``, answered in TEI's shapes and equal to the engine's outputs, failing with
TEI's ``{"error", "error_type"}`` bodies and status codes (issue 45 item 9). The clients that call
these routes are in test_tei_clients.py."""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from poolrag import Engine, PoolingParams
from poolrag.server import ServerSettings
from poolrag.server.app import create_models_app
from poolrag.testing.live_server import LiveServer

from .conftest import Served, serve_in_thread

TEXTS = ["A cat sat on the mat.", "Stock markets fell sharply on Monday.", "Paris is the capital of France."]
#: About 330 tokens: over MiniLM's 256.
LONG = "The committee reviewed the proposal in great detail before it voted. " * 30
QUERY = "Where does the cat sit?"


def _post(url: str, path: str, body: object) -> httpx.Response:
    return httpx.post(f"{url}{path}", json=body, timeout=120)


def _ok(response: httpx.Response) -> object:
    assert response.status_code == 200, response.text[:500]
    return response.json()


@pytest.fixture(scope="module")
def minilm(minilm_engine: Engine) -> Iterator[Served]:
    with serve_in_thread(minilm_engine, served_model_names=("minilm",), max_inputs=8) as url:
        yield Served(url, "minilm", minilm_engine)


@pytest.fixture(scope="module")
def prompted(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """MiniLM with sentence-transformers prompts in its folder."""
    folder = tmp_path_factory.mktemp("tei-prompted") / "minilm-prompted"
    shutil.copytree(minilm_path, folder)
    config = folder / "config_sentence_transformers.json"
    settings = json.loads(config.read_text()) if config.exists() else {}
    config.write_text(json.dumps({**settings, "prompts": {"query": "query: ", "document": "passage: "}}))
    engine = Engine(folder, tune="off")
    with serve_in_thread(engine, served_model_names=("prompted",)) as url:
        yield Served(url, "prompted", engine)


# -- /embed, /embed_all, /similarity --------------------------------------------------------------------
def test_embed_answers_the_engines_vectors_as_a_bare_list(minilm: Served) -> None:
    engine = minilm.engine
    got = np.array(_ok(_post(minilm.url, "/embed", {"inputs": TEXTS})))
    np.testing.assert_allclose(got, engine.embed_array(TEXTS), atol=1e-6, rtol=0)
    single = _ok(_post(minilm.url, "/embed", {"inputs": TEXTS[0]}))
    assert np.array(single).shape == (1, 384)  # one input: still a list of one vector, as TEI
    ids = _ok(_post(minilm.url, "/embed", {"inputs": engine.tokenize(TEXTS[1])}))  # TEI's token-id input
    np.testing.assert_allclose(np.array(ids), engine.embed_array(TEXTS[1:2]), atol=1e-6, rtol=0)


@pytest.mark.parametrize("path", ["/embed", "/embed_all", "/"])
def test_a_batch_may_mix_texts_and_token_id_lists_as_tei_takes_it(minilm: Served, path: str) -> None:
    """TEI's ``inputs`` batch holds strings or id lists, item by item (its ``Vec<InputType>``)."""
    engine = minilm.engine
    mixed = [TEXTS[0], engine.tokenize(TEXTS[1]), TEXTS[2]]
    got = _ok(_post(minilm.url, path, {"inputs": mixed}))
    if path == "/embed_all":  # every token's row, not normalised
        rows = engine.encode(TEXTS, "token_embed", PoolingParams(normalize=False))
        expected = [out.outputs.data for out in rows]
    else:
        expected = list(engine.embed_array(TEXTS))
    assert len(got) == len(TEXTS)
    for row, want in zip(got, expected, strict=True):
        np.testing.assert_allclose(np.array(row), want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "inputs", [[1, "a"], ["a", 1], ["a", [1, "b"]], [[101], [True]], ["a", None], [7] * 1000 + ["a"]]
)
def test_a_batch_item_neither_text_nor_token_ids_is_tei_s_validation_error(
    minilm: Served, inputs: list[object]
) -> None:
    answer = _post(minilm.url, "/embed", {"inputs": inputs})
    assert answer.status_code == 422, answer.text[:300]
    assert answer.json() == {
        "error": "inputs: must be a string, a list of token ids, or a list whose items are strings or "
        "token-id lists",
        "error_type": "Validation",
    }


@pytest.mark.parametrize("path", ["/embed", "/embed_all", "/"])
@pytest.mark.parametrize(
    ("inputs", "named"),
    [
        ([[101, 2023, 102], [101, -1, 102]], "inputs[1]: token ids must be in [0, "),
        ([[101, 2023, 102], [101, 30522]], "inputs[1]: token ids must be in [0, "),
        ([2023, 2003], "inputs: token ids that do not start with this model's [CLS]"),
    ],
)
def test_token_ids_the_model_cannot_read_are_named_as_tei_s_inputs(
    minilm: Served, path: str, inputs: list[object], named: str
) -> None:
    """The engine names them ``input[1]``, a field a TEI client never sent."""
    answer = _post(minilm.url, path, {"inputs": inputs})
    assert answer.status_code == 422, answer.text[:300]
    assert answer.json()["error_type"] == "Validation"
    assert answer.json()["error"].startswith(named), answer.json()


def test_normalize_false_gives_the_vectors_as_pooled(minilm: Served) -> None:
    got = np.array(_ok(_post(minilm.url, "/embed", {"inputs": TEXTS, "normalize": False})))
    expected = minilm.engine.embed_array(TEXTS, PoolingParams(normalize=False))
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-6)
    assert not np.allclose(np.linalg.norm(got, axis=1), 1.0)


def test_dimensions_and_prompt_name(matryoshka_server: Served, prompted: Served) -> None:
    body = {"inputs": TEXTS, "dimensions": 128}
    got = np.array(_ok(_post(matryoshka_server.url, "/embed", body)))
    expected = matryoshka_server.engine.embed_array(TEXTS, PoolingParams(dimensions=128))
    np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)
    got = np.array(_ok(_post(prompted.url, "/embed", {"inputs": TEXTS, "prompt_name": "query"})))
    expected = prompted.engine.embed_array(TEXTS, PoolingParams(prompt_name="query"))
    np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)
    assert not np.allclose(got, prompted.engine.embed_array(TEXTS), atol=1e-3)


def test_dimensions_cut_any_models_vectors_as_tei_does(minilm: Served) -> None:
    """TEI cuts every model's vector to ``dimensions`` and then normalises (its infer.rs); MiniLM is
    no Matryoshka model, so ``/v1/embeddings`` refuses the same size (test_embeddings.py)."""
    raw = minilm.engine.embed_array(TEXTS, PoolingParams(normalize=False))
    got = np.array(_ok(_post(minilm.url, "/embed", {"inputs": TEXTS, "dimensions": 100})))
    expected = raw[:, :100] / np.linalg.norm(raw[:, :100], axis=1, keepdims=True)
    np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)
    body = {"inputs": TEXTS, "dimensions": 100, "normalize": False}
    unnormalised = np.array(_ok(_post(minilm.url, "/embed", body)))
    np.testing.assert_allclose(unnormalised, raw[:, :100], atol=1e-5, rtol=1e-6)


def test_fields_tei_does_not_know_are_ignored_as_tei_ignores_them(
    minilm: Served, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """TEI's request types deny no unknown field, so clients send their own options: the answer is
    the one without them, and the log names each ignored field once (once a process: the names this
    process already logged, by any earlier test, are set aside)."""
    from poolrag.server import tei_schemas

    monkeypatch.setattr(tei_schemas, "_named_ignored", set())
    expected = minilm.engine.embed_array(TEXTS)
    with caplog.at_level("WARNING", logger="poolrag.server.tei_schemas"):
        for _ in range(2):
            got = _ok(_post(minilm.url, "/embed", {"inputs": TEXTS, "nope": 1, "parameters": {"x": 2}}))
            np.testing.assert_allclose(np.array(got), expected, atol=1e-6, rtol=0)
    named = [r.getMessage() for r in caplog.records if "ignoring fields" in r.getMessage()]
    assert named == ["ignoring fields TEI ignores (logged once): ['nope', 'parameters'] in TeiEmbedRequest"]


def test_the_ignored_names_kept_for_the_log_are_bounded(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The names are the client's: a stream of new ones neither grows memory nor floods the log."""
    from poolrag.server import tei_schemas

    monkeypatch.setattr(tei_schemas, "_named_ignored", set())
    monkeypatch.setattr(tei_schemas, "_NAMED_AT_MOST", 3)
    with caplog.at_level("WARNING", logger="poolrag.server.tei_schemas"):
        for batch in (["a", "b"], ["c", "d"], ["e"]):
            tei_schemas.TeiEmbedRequest.model_validate({"inputs": "x", **dict.fromkeys(batch, 1)})
    assert len(caplog.records) == 2 and len(tei_schemas._named_ignored) == 4


def test_a_megabyte_long_ignored_name_is_logged_and_kept_cut_short(
    minilm: Served, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The bound on names counted them only: each of 30 requests with a new 10 MB field name kept
    it until the server stopped (RSS +276 MB) and wrote it to the log (300 MB)."""
    from poolrag.server import tei_schemas

    monkeypatch.setattr(tei_schemas, "_named_ignored", set())
    name = "x" * 1_000_000
    with caplog.at_level("WARNING", logger="poolrag.server.tei_schemas"):
        _ok(_post(minilm.url, "/embed", {"inputs": TEXTS, name: 1}))
    (logged,) = [r.getMessage() for r in caplog.records if "ignoring fields" in r.getMessage()]
    assert f"['{'x' * 64}...'] in TeiEmbedRequest" in logged and len(logged) < 200
    assert tei_schemas._named_ignored == {f"TeiEmbedRequest.{'x' * 64}..."}


def test_the_root_embeds_a_list_posted_with_parameters(minilm: Served) -> None:
    """langchain-community's ``HuggingFaceHubEmbeddings.aembed_documents`` posts
    ``{"inputs": texts, "parameters": model_kwargs}`` to the bare URL: an embedder embeds it, as TEI
    does (one text with ``parameters`` is ``text_classification``'s, test_tei_clients.py)."""
    for parameters in ({}, {"truncate": True}):
        got = _ok(_post(minilm.url, "/", {"inputs": TEXTS, "parameters": parameters}))
        np.testing.assert_allclose(np.array(got), minilm.engine.embed_array(TEXTS), atol=1e-6, rtol=0)


def test_truncate_true_cuts_false_refuses_and_unset_is_the_servers_default(minilm: Served) -> None:
    cut = minilm.engine.embed_array([LONG], PoolingParams(truncate_prompt_tokens=-1))
    for body in ({"inputs": [LONG], "truncate": True}, {"inputs": [LONG]}):
        response = _post(minilm.url, "/embed", body)
        np.testing.assert_allclose(np.array(_ok(response)), cut, atol=1e-6, rtol=0)
        assert response.headers["x-truncated-inputs"] == "1"
    refused = _post(minilm.url, "/embed", {"inputs": [LONG], "truncate": False})
    assert refused.status_code == 422
    assert refused.json()["error_type"] == "Validation" and "at most 256 tokens" in refused.json()["error"]


def test_embed_all_is_every_tokens_row_as_the_model_outputs_it(minilm: Served) -> None:
    got = _ok(_post(minilm.url, "/embed_all", {"inputs": TEXTS[:2]}))
    expected = minilm.engine.encode(TEXTS[:2], "token_embed", PoolingParams(normalize=False))
    assert len(got) == 2
    for rows, out in zip(got, expected, strict=True):
        assert len(rows) == len(out.prompt_token_ids)  # [CLS] and [SEP] included
        np.testing.assert_allclose(np.array(rows), out.outputs.data, atol=1e-5, rtol=0)


def test_similarity_is_the_engines_cosine_score(minilm: Served) -> None:
    body = {"inputs": {"source_sentence": QUERY, "sentences": TEXTS}, "parameters": {"truncate": True}}
    got = _ok(_post(minilm.url, "/similarity", body))
    expected = [out.outputs.score for out in minilm.engine.score(QUERY, TEXTS)]
    np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)


# -- /rerank, /predict ----------------------------------------------------------------------------------
def test_rerank_with_texts_answers_teis_ranks(cross_encoder_server: Served) -> None:
    engine = cross_encoder_server.engine
    scores = [out.outputs.score for out in engine.score(QUERY, TEXTS)]
    ranks = _ok(_post(cross_encoder_server.url, "/rerank", {"query": QUERY, "texts": TEXTS}))
    assert [r["index"] for r in ranks] == sorted(range(len(TEXTS)), key=lambda i: -scores[i])
    assert all(set(r) == {"index", "score"} for r in ranks)  # no text unless asked
    np.testing.assert_allclose([r["score"] for r in ranks], sorted(scores, reverse=True), atol=1e-6)
    body = {"query": QUERY, "texts": TEXTS, "return_text": True, "raw_scores": True}
    raw = _ok(_post(cross_encoder_server.url, "/rerank", body))
    logits = [out.outputs.score for out in engine.score(QUERY, TEXTS, PoolingParams(use_activation=False))]
    expected = sorted(zip(TEXTS, logits, strict=True), key=lambda pair: -pair[1])
    assert [r["text"] for r in raw] == [text for text, _ in expected]
    np.testing.assert_allclose([r["score"] for r in raw], [score for _, score in expected], atol=1e-5)
    jina = _ok(_post(cross_encoder_server.url, "/rerank", {"query": QUERY, "documents": TEXTS}))
    assert [r["index"] for r in jina["results"]] == [r["index"] for r in ranks]  # the other dialect stays


def test_a_cross_encoder_saying_identity_answers_teis_sigmoid_on_tei_routes(
    tmp_path: Path, minilm_path: Path
) -> None:
    """TEI reads no activation from a folder: one logit through a sigmoid unless ``raw_scores``. A
    cross-encoder saved with an Identity activation (ms-marco's) answers logits on the vLLM
    routes, as vLLM and sentence-transformers give them, and TEI's probabilities on TEI's."""
    import torch
    from sentence_transformers import CrossEncoder

    from poolrag.testing.tiny_models import build_encoder

    raw = build_encoder(tmp_path / "raw", "bert", minilm_path, head="sequence", num_labels=1, seed=5)
    CrossEncoder(str(raw), device="cpu", activation_fn=torch.nn.Identity()).save(str(tmp_path / "ce"))
    logits = CrossEncoder(str(tmp_path / "ce"), device="cpu").predict([(QUERY, t) for t in TEXTS])
    probabilities = 1 / (1 + np.exp(-logits.astype(np.float64)))
    with serve_in_thread(Engine(tmp_path / "ce", tune="off"), served_model_names=("ce",)) as url:
        tei = _ok(_post(url, "/rerank", {"query": QUERY, "texts": TEXTS}))
        np.testing.assert_allclose(
            [r["score"] for r in tei], probabilities[[r["index"] for r in tei]], atol=1e-5
        )
        tei_raw = _ok(_post(url, "/rerank", {"query": QUERY, "texts": TEXTS, "raw_scores": True}))
        np.testing.assert_allclose(
            [r["score"] for r in tei_raw], logits[[r["index"] for r in tei_raw]], atol=1e-5
        )
        predicted = _ok(_post(url, "/predict", {"inputs": [QUERY, TEXTS[0]]}))
        assert predicted[0]["score"] == pytest.approx(probabilities[0], abs=1e-5)
        vllm = _ok(_post(url, "/rerank", {"query": QUERY, "documents": TEXTS}))["results"]
        np.testing.assert_allclose(
            [r["relevance_score"] for r in vllm], logits[[r["index"] for r in vllm]], atol=1e-5
        )


def test_a_cross_encoder_of_several_labels_saved_as_identity_answers_teis_softmax_on_predict(
    tmp_path: Path, minilm_path: Path
) -> None:
    """sentence-transformers 6 saves a CrossEncoder of three labels with an Identity activation:
    ``predict`` gives its logits, and so did TEI's ``/predict`` here, where TEI gives a softmax;
    ``raw_scores`` gives the logits."""
    import torch
    from sentence_transformers import CrossEncoder

    from poolrag.testing.tiny_models import build_encoder

    raw = build_encoder(tmp_path / "raw", "bert", minilm_path, head="sequence", num_labels=3, seed=5)
    CrossEncoder(str(raw), device="cpu", activation_fn=torch.nn.Identity()).save(str(tmp_path / "nli"))
    logits = CrossEncoder(str(tmp_path / "nli"), device="cpu").predict([(QUERY, TEXTS[0])])[0]
    softmax = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    with serve_in_thread(Engine(tmp_path / "nli", tune="off"), served_model_names=("nli",)) as url:
        tei = _ok(_post(url, "/predict", {"inputs": [QUERY, TEXTS[0]]}))
        np.testing.assert_allclose([p["score"] for p in tei], np.sort(softmax)[::-1], atol=1e-5)
        tei_raw = _ok(_post(url, "/predict", {"inputs": [QUERY, TEXTS[0]], "raw_scores": True}))
        np.testing.assert_allclose([p["score"] for p in tei_raw], np.sort(logits)[::-1], atol=1e-5)


def test_predict_classifies_texts_and_scores_pairs(
    cross_encoder_server: Served, classifier_server: Served
) -> None:
    classifier = classifier_server.engine
    one = _ok(_post(classifier_server.url, "/predict", {"inputs": TEXTS[0]}))
    probs = classifier.classify(TEXTS[:1])[0].outputs.probs
    labels = classifier.id2label
    assert [p["label"] for p in one] == [labels[i] for i in np.argsort(-probs, kind="stable")]
    np.testing.assert_allclose([p["score"] for p in one], np.sort(probs)[::-1], atol=1e-6)
    top = _ok(_post(classifier_server.url, "/", {"inputs": TEXTS[0], "parameters": {"top_k": 1}}))
    assert top == one[:1]  # POST / on a classifier predicts; top_k keeps the best
    raw = _ok(_post(classifier_server.url, "/predict", {"inputs": [[TEXTS[1]]], "raw_scores": True}))
    logits = classifier.classify(TEXTS[1:2], PoolingParams(use_activation=False))[0].outputs.probs
    assert len(raw) == 1  # a batch: a list per input
    np.testing.assert_allclose(sorted(p["score"] for p in raw[0]), np.sort(logits), atol=1e-5)

    reranker = cross_encoder_server.engine
    batch = [[QUERY, TEXTS[0]], [TEXTS[2]]]
    got = _ok(_post(cross_encoder_server.url, "/predict", {"inputs": batch}))
    pair_score = reranker.score(QUERY, TEXTS[:1])[0].outputs.score
    text_score = float(reranker.classify(TEXTS[2:])[0].outputs.probs[0])
    assert [[p["label"] for p in one] for one in got] == [[reranker.id2label[0]]] * 2
    np.testing.assert_allclose([got[0][0]["score"], got[1][0]["score"]], [pair_score, text_score], atol=1e-6)
    pair = _ok(_post(cross_encoder_server.url, "/predict", {"inputs": [QUERY, TEXTS[0]]}))
    assert pair == got[0]  # one pair: a list, not a list of lists


def test_predict_reads_a_pair_through_a_classifier_of_several_labels(classifier_server: Served) -> None:
    """An NLI model's premise and hypothesis read jointly, as ``CrossEncoder.predict`` reads the
    pair: every label, through the model's activation as a text's (this multi-label model's
    sigmoid), where ``classify_pairs`` gives ``CrossEncoder.predict``'s logits."""
    classifier = classifier_server.engine
    premise, hypothesis = TEXTS[0], QUERY
    got = _ok(_post(classifier_server.url, "/predict", {"inputs": [premise, hypothesis]}))
    logits = classifier.classify_pairs(premise, hypothesis, PoolingParams(use_activation=False))[
        0
    ].outputs.probs
    assert classifier.classify_activation == "sigmoid"
    probs = 1 / (1 + np.exp(-logits))
    assert [p["label"] for p in got] == [classifier.id2label[i] for i in np.argsort(-probs, kind="stable")]
    np.testing.assert_allclose([p["score"] for p in got], np.sort(probs)[::-1], atol=1e-6)
    alone = classifier.classify([premise])[0].outputs.probs
    assert not np.allclose(probs, alone)  # the hypothesis was read with it
    batch = _ok(_post(classifier_server.url, "/predict", {"inputs": [[premise], [premise, hypothesis]]}))
    assert batch[1] == got and [p["label"] for p in batch[0]] == [
        classifier.id2label[i] for i in np.argsort(-alone, kind="stable")
    ]


def test_post_root_is_the_route_of_the_models_kind(minilm: Served, cross_encoder_server: Served) -> None:
    embedded = _ok(_post(minilm.url, "/", {"inputs": TEXTS}))
    np.testing.assert_allclose(np.array(embedded), minilm.engine.embed_array(TEXTS), atol=1e-6, rtol=0)
    similar = _ok(_post(minilm.url, "/", {"inputs": {"source_sentence": QUERY, "sentences": TEXTS}}))
    assert similar == _ok(
        _post(minilm.url, "/similarity", {"inputs": {"source_sentence": QUERY, "sentences": TEXTS}})
    )
    ranked = _ok(_post(cross_encoder_server.url, "/", {"query": QUERY, "texts": TEXTS}))
    assert ranked == _ok(_post(cross_encoder_server.url, "/rerank", {"query": QUERY, "texts": TEXTS}))
    # /predict's body as a classification sends it: text_classification's parameters, raw_scores,
    # a batch of pairs; a bare text or list is /embed's, which TEI's reranker refuses at / too
    predicted = _ok(_post(cross_encoder_server.url, "/", {"inputs": TEXTS[0], "parameters": {}}))
    assert predicted == _ok(_post(cross_encoder_server.url, "/predict", {"inputs": TEXTS[0]}))
    for body in ({"inputs": TEXTS[0], "raw_scores": True}, {"inputs": [[QUERY, TEXTS[0]], [TEXTS[1]]]}):
        assert _ok(_post(cross_encoder_server.url, "/", body)) == _ok(
            _post(cross_encoder_server.url, "/predict", body)
        )
    for inputs in (TEXTS[0], TEXTS[:2]):
        refused = _post(cross_encoder_server.url, "/", {"inputs": inputs})
        assert refused.status_code == 422
        assert refused.json()["error_type"] == "Validation"
        assert "gives no embeddings" in refused.json()["error"]
    # SageMaker's path of the same route
    assert _ok(_post(minilm.url, "/invocations", {"inputs": TEXTS})) == embedded
    assert _ok(_post(cross_encoder_server.url, "/invocations", {"query": QUERY, "texts": TEXTS})) == ranked


# -- /tokenize, /decode, /info --------------------------------------------------------------------------
def test_tokenize_with_inputs_answers_teis_tokens_with_byte_offsets(minilm: Served, prompted: Served) -> None:
    text = "Crème brûlée costs 5€."
    (tokens,) = _ok(_post(minilm.url, "/tokenize", {"inputs": text}))
    assert [t["id"] for t in tokens] == minilm.engine.tokenize(text)
    first, *words, last = tokens
    assert (first["text"], first["special"], first["start"], first["stop"]) == ("[CLS]", True, None, None)
    assert last["special"] and last["start"] is None
    raw = text.encode()
    for token in words:
        assert not token["special"]
        assert raw[token["start"] : token["stop"]].decode() == token["text"]  # UTF-8 bytes, as TEI counts
    assert words[-1]["stop"] == len(raw) and words[-1]["stop"] > len(text)
    bare = _ok(_post(minilm.url, "/tokenize", {"inputs": [text, "a cat"], "add_special_tokens": False}))
    assert [len(one) for one in bare] == [len(words), 2] and not any(t["special"] for t in bare[0])
    (prompted_tokens,) = _ok(_post(prompted.url, "/tokenize", {"inputs": "a cat", "prompt_name": "query"}))
    assert [t["text"] for t in prompted_tokens] == ["[CLS]", "query", ":", "a", "cat", "[SEP]"]
    vllm = _ok(_post(minilm.url, "/tokenize", {"prompt": text}))  # the path's vLLM dialect stays
    assert vllm["tokens"] == [t["id"] for t in tokens]


def test_decode_and_info(minilm: Served, cross_encoder_server: Served, classifier_server: Served) -> None:
    ids = minilm.engine.tokenize("hello world")
    assert _ok(_post(minilm.url, "/decode", {"ids": ids})) == ["hello world"]
    both = _ok(_post(minilm.url, "/decode", {"ids": [ids, ids], "skip_special_tokens": False}))
    assert both == ["[CLS] hello world [SEP]"] * 2
    info = httpx.get(f"{minilm.url}/info", timeout=30).json()
    assert info["model_id"] == info["served_model_name"] == "minilm"
    assert info["model_type"] == {"embedding": {"pooling": "mean"}}
    assert (info["max_input_length"], info["max_client_batch_size"], info["auto_truncate"]) == (256, 8, True)
    reranker = httpx.get(f"{cross_encoder_server.url}/info", timeout=30).json()["model_type"]
    assert reranker == {"reranker": {"id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}}}
    classifier = httpx.get(f"{classifier_server.url}/info", timeout=30).json()["model_type"]
    assert classifier["classifier"]["id2label"] == {"0": "sports", "1": "politics", "2": "science"}


# -- errors ---------------------------------------------------------------------------------------------
ERRORS = [
    ("minilm", "/embed", {"inputs": []}, 400, "Empty", "inputs must not be empty"),
    ("minilm", "/embed", {"inputs": ["a"] * 9}, 422, "Validation", "more than this server's limit of 8"),
    ("minilm", "/embed", {"inputs": "a", "truncation_direction": "left"}, 422, "Validation", "Left"),
    ("minilm", "/embed", {"inputs": "a", "model": "other"}, 404, "Validation", "'other' is not served"),
    ("minilm", "/embed", {"inputs": "a", "dimensions": 385}, 422, "Validation", "between 1 and 384"),
    ("minilm", "/embed", {"inputs": "a", "prompt_name": "query"}, 422, "Validation", "prompt_name"),
    ("minilm", "/predict", {"inputs": "a"}, 424, "Backend", "'classify' is not supported"),
    ("minilm", "/predict", {"inputs": ["a", "b", "c"]}, 422, "Validation", "a pair of strings"),
    ("minilm", "/rerank", {"query": "q", "texts": []}, 400, "Empty", "texts must not be empty"),
    (
        "minilm",
        "/rerank",
        {"query": "q", "texts": ["a"], "raw_scores": True},
        422,
        "Validation",
        "raw_scores applies to a cross-encoder's logit; this model ranks by cosine",
    ),
    ("minilm", "/tokenize", {"inputs": " "}, 400, "Empty", "inputs is empty"),
    ("minilm", "/decode", {"ids": [10**6]}, 422, "Validation", "not a token id"),
    ("minilm", "/decode", {"ids": []}, 400, "Empty", "`input_ids` cannot be empty"),
    ("minilm", "/decode", {"ids": [[5], []]}, 400, "Empty", "`input_ids` cannot be empty"),
    (
        "minilm",
        "/similarity",
        {"inputs": {"source_sentence": "a", "sentences": []}},
        400,
        "Empty",
        "sentences",
    ),
    (
        "minilm",
        "/similarity",
        {"inputs": {"source_sentence": " ", "sentences": ["a"]}},
        400,
        "Empty",
        "inputs.source_sentence is empty",
    ),
    (
        "minilm",
        "/similarity",
        {"inputs": {"source_sentence": "a", "sentences": ["b", ""]}},
        400,
        "Empty",
        "inputs.sentences[1] is empty",
    ),
    ("classifier_server", "/predict", {"inputs": " "}, 400, "Empty", "inputs is empty"),
    ("minilm", "/embed_sparse", {"inputs": "a"}, 424, "Backend", "'sparse_embed' is not supported"),
    ("classifier_server", "/embed", {"inputs": "a"}, 424, "Backend", "'embed' is not supported"),
    ("minilm", "/predict", {"inputs": ["a", "b"]}, 424, "Backend", "'classify' is not supported"),
    ("classifier_server", "/predict", {"inputs": [["a"], ["b", " "]]}, 400, "Empty", "inputs[1][1] is empty"),
    ("classifier_server", "/embed_all", {"inputs": "a"}, 424, "Backend", "'token_embed' is not supported"),
    (
        "cross_encoder_server",
        "/predict",
        {"inputs": [["a", "b"], ["c", "d", "e"]]},
        422,
        "Validation",
        "pair",
    ),
]


@pytest.mark.parametrize(("server", "path", "body", "status", "error_type", "fragment"), ERRORS)
def test_errors_are_teis(
    request: pytest.FixtureRequest,
    server: str,
    path: str,
    body: dict,
    status: int,
    error_type: str,
    fragment: str,
) -> None:
    served: Served = request.getfixturevalue(server)
    response = _post(served.url, path, body)
    assert response.status_code == status, response.text
    assert set(response.json()) == {"error", "error_type"}
    assert response.json()["error_type"] == error_type and fragment in response.json()["error"]


@pytest.mark.parametrize("path", ["/embed", "/embed_all", "/", "/invocations"])
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
def test_a_body_not_declared_as_json_is_teis_415(minilm: Served, path: str, content_type: str) -> None:
    """As TEI's JSON extractor (axum's) answers it; it was a 422, which says the JSON was wrong."""
    body = json.dumps({"inputs": "a"}).encode()
    headers = {"content-type": content_type}
    answer = httpx.post(f"{minilm.url}{path}", content=body, headers=headers, timeout=30)
    assert answer.status_code == 415, answer.text
    assert answer.json() == {
        "error": f"the body must be JSON (Content-Type: application/json), not {content_type}",
        "error_type": "Validation",
    }


def test_unparsable_json_and_the_other_dialects_errors(minilm: Served) -> None:
    json_type = {"content-type": "application/json"}
    broken = httpx.post(f"{minilm.url}/embed", content=b'{"inputs": [', headers=json_type, timeout=30)
    assert broken.status_code == 400 and broken.json()["error_type"] == "Validation"
    for path, body in (("/rerank", {"query": "q", "documents": []}), ("/tokenize", {"prompt": " "})):
        openai_shaped = _post(minilm.url, path, body)  # the paths' other dialects keep OpenAI's errors
        assert openai_shaped.status_code == 400 and openai_shaped.json()["error"]["code"] == "empty_input"


LONE_SURROGATE = "\\ud800"  # JSON's escape of half a UTF-16 pair: valid to Python's json, not to serde_json's


@pytest.mark.parametrize(
    ("server", "path", "body", "named"),
    [
        ("minilm", "/embed", f'{{"inputs": ["a", "x{LONE_SURROGATE}"]}}', "inputs[1]"),
        ("minilm", "/", f'{{"inputs": "{LONE_SURROGATE}"}}', "inputs"),
        (
            "minilm",
            "/similarity",
            f'{{"inputs": {{"source_sentence": "{LONE_SURROGATE}", "sentences": ["a"]}}}}',
            "inputs.source_sentence",
        ),
        ("cross_encoder_server", "/rerank", f'{{"query": "q", "texts": ["{LONE_SURROGATE}"]}}', "texts[0]"),
        ("classifier_server", "/predict", f'{{"inputs": [["a", "{LONE_SURROGATE}"]]}}', "inputs[0][1]"),
        ("minilm", "/tokenize", f'{{"inputs": "{LONE_SURROGATE}"}}', "inputs"),
    ],
)
def test_a_text_that_is_not_unicode_is_teis_400_as_its_json_extractor_answers(
    request: pytest.FixtureRequest, server: str, path: str, body: str, named: str
) -> None:
    """TEI never reads such a text: serde_json refuses a lone surrogate as a syntax error, which
    axum's ``Json`` answers with 400 (was 422 here)."""
    served: Served = request.getfixturevalue(server)
    json_type = {"content-type": "application/json"}
    refused = httpx.post(f"{served.url}{path}", content=body.encode(), headers=json_type, timeout=30)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error_type"] == "Validation"
    assert refused.json()["error"].startswith(f"{named} is not valid Unicode (lone surrogate at character")


def test_a_full_queue_is_teis_429_with_retry_after(one_slot_server: Served) -> None:
    url = one_slot_server.url
    busy_texts = [f"document {i} " + "about the properties of bounded queues " * 12 for i in range(96)]
    busy = threading.Thread(target=lambda: _post(url, "/embed", {"inputs": busy_texts}))
    busy.start()
    deadline = time.monotonic() + 60
    while 'poolrag_queue_depth{model="minilm"} 1.0' not in httpx.get(f"{url}/metrics", timeout=30).text:
        assert busy.is_alive() and time.monotonic() < deadline, "the busy request never held the slot"
        time.sleep(0.005)
    refused = _post(url, "/embed", {"inputs": "one more"})
    busy.join(timeout=300)
    assert refused.status_code == 429 and refused.headers["retry-after"] == "2"
    assert refused.json()["error_type"] == "Overloaded" and "at capacity" in refused.json()["error"]


def test_a_model_of_no_tei_kind_says_so_at_root_and_info_names_its_labels(tiny_model) -> None:
    """A token classifier (TEI serves none): huggingface_hub's token_classification posted to / and
    got '405 Method Not Allowed', and /info called the model an embedding model with CLS pooling."""
    tagger = Engine(tiny_model("bert", head="token", num_labels=3))
    with LiveServer(create_models_app([(tagger, ServerSettings(served_model_names=("ner",)))])) as live:
        for path in ("/", "/invocations"):
            refused = _post(live.url, path, {"inputs": "John lives in Paris."})
            assert refused.status_code == 424 and refused.json()["error_type"] == "Backend"
            assert "POST /pooling with one of them as task" in refused.json()["error"]
            assert "token_classify" in refused.json()["error"]
        info = _ok(httpx.get(f"{live.url}/info", timeout=60))
    assert set(info["model_type"]) == {"classifier"}
    expected = {str(i): label for i, label in sorted(tagger.id2label.items())}
    assert info["model_type"]["classifier"]["id2label"] == expected
