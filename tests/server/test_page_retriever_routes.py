"""A served page retriever (ColPali): pages cross HTTP as data URLs in vLLM's ``/pooling``,
``/score`` and ``/rerank``, and come back as the engine's own token vectors and MaxSim scores; a
page that is not an image is a 400 naming it."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from poolrag import Engine, InvalidInputError
from poolrag.testing.live_server import serve
from poolrag.testing.tiny_models import build_colpali

pytest.importorskip("PIL.Image", reason="pages need the images extra (Pillow)")
SAMPLES = Path(pytest.importorskip("matplotlib").get_data_path()) / "sample_data"
PAGES = [SAMPLES / "grace_hopper.jpg", SAMPLES / "logo2.png"]


def _data_url(path: Path) -> str:
    kind = "jpeg" if path.suffix == ".jpg" else "png"
    return f"data:image/{kind};base64," + base64.b64encode(path.read_bytes()).decode()


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> Engine:
    return Engine(build_colpali(tmp_path_factory.mktemp("colpali"), minilm_path))


@pytest.fixture(scope="module")
def url(engine: Engine) -> Iterator[str]:
    yield from serve(engine, "colpali")


def test_rerank_and_score_rank_pages_by_the_engine_s_maxsim(engine: Engine, url: str) -> None:
    query = "an admiral's portrait"
    want = [out.outputs.score for out in engine.score(query, PAGES)]
    documents = [_data_url(p) for p in PAGES]
    rerank = httpx.post(f"{url}/rerank", json={"model": "colpali", "query": query, "documents": documents})
    assert rerank.status_code == 200, rerank.text
    by_index = {r["index"]: r["relevance_score"] for r in rerank.json()["results"]}
    np.testing.assert_allclose([by_index[0], by_index[1]], want, rtol=1e-5)
    score = httpx.post(f"{url}/score", json={"model": "colpali", "text_1": query, "text_2": documents})
    assert score.status_code == 200, score.text
    np.testing.assert_allclose([row["score"] for row in score.json()["data"]], want, rtol=1e-5)


def test_vllm_s_multimodal_content_form_ranks_the_same_pages(engine: Engine, url: str) -> None:
    """vLLM's ``{"content": [image_url part]}`` for ``text_2`` / ``documents`` (its vision score
    example), each one page, alone or in a list: the same scores as the pages sent as data URL
    strings. A content of several parts, which vLLM fuses into one input, is refused (it was read
    as one page per part); a remote URL is refused, nothing fetched."""
    query = "an admiral's portrait"
    want = [out.outputs.score for out in engine.score(query, PAGES)]
    pages = [{"content": [{"type": "image_url", "image_url": {"url": _data_url(p)}}]} for p in PAGES]
    score = httpx.post(f"{url}/score", json={"model": "colpali", "text_1": query, "text_2": pages})
    assert score.status_code == 200, score.text
    np.testing.assert_allclose([row["score"] for row in score.json()["data"]], want, rtol=1e-5)
    body = {"model": "colpali", "query": query, "documents": pages, "return_documents": False}
    rerank = httpx.post(f"{url}/rerank", json=body)
    assert rerank.status_code == 200, rerank.text
    by_index = {r["index"]: r["relevance_score"] for r in rerank.json()["results"]}
    np.testing.assert_allclose([by_index[0], by_index[1]], want, rtol=1e-5)
    one = httpx.post(f"{url}/rerank", json={"model": "colpali", "query": query, "documents": pages[1]})
    assert one.status_code == 200, one.text
    (result,) = one.json()["results"]
    assert result["document"] == {"text": None, "multi_modal": pages[1]["content"]}
    np.testing.assert_allclose(result["relevance_score"], want[1], rtol=1e-5)
    fused = {"content": pages[0]["content"] + pages[1]["content"]}
    refused = httpx.post(f"{url}/score", json={"model": "colpali", "text_1": query, "text_2": fused})
    assert refused.status_code == 400
    assert refused.json()["error"]["message"].startswith("text_2.content has 2 parts, which vLLM fuses")
    remote = {"content": [{"type": "image_url", "image_url": {"url": "https://example.com/p.png"}}]}
    refused = httpx.post(f"{url}/rerank", json={"model": "colpali", "query": query, "documents": remote})
    assert refused.status_code == 400
    message = refused.json()["error"]["message"]
    assert (
        message
        == "documents.content[0].image_url.url must be a data:image/...;base64, URL (nothing is fetched)"
    )


def test_vllm_s_other_part_forms_in_a_score_content_rank_the_same_pages(engine: Engine, url: str) -> None:
    """vLLM reads a score content's parts as its chat parts: the Responses API's ``input_image``
    (its ``image_url`` the URL) and ``input_text``, and an ``image_url`` part without ``type``; they
    were a 400 ('must be a text part or an image_url part')."""
    query = "an admiral's portrait"
    want = [out.outputs.score for out in engine.score(query, PAGES)]
    pages = [
        {"content": [{"type": "input_image", "image_url": _data_url(PAGES[0])}]},
        {"content": [{"image_url": {"url": _data_url(PAGES[1])}}]},
    ]
    text_1 = {"content": [{"type": "input_text", "text": query}]}
    score = httpx.post(f"{url}/score", json={"model": "colpali", "text_1": text_1, "text_2": pages})
    assert score.status_code == 200, score.text
    np.testing.assert_allclose([row["score"] for row in score.json()["data"]], want, rtol=1e-5)
    remote = {"content": [{"type": "input_image", "image_url": "https://example.com/p.png"}]}
    refused = httpx.post(f"{url}/rerank", json={"model": "colpali", "query": query, "documents": remote})
    assert refused.status_code == 400
    message = refused.json()["error"]["message"]
    assert message == (
        "documents.content[0].image_url must be a data:image/...;base64, URL (nothing is fetched)"
    )


def test_pooling_returns_a_page_s_token_vectors(engine: Engine, url: str) -> None:
    body = {"model": "colpali", "input": [_data_url(PAGES[0]), "a query"], "task": "token_embed"}
    answer = httpx.post(f"{url}/pooling", json=body)
    assert answer.status_code == 200, answer.text
    got = [np.asarray(row["data"], np.float32) for row in answer.json()["data"]]
    want = [
        np.asarray(out.outputs.data)
        for out in engine.encode([PAGES[0], "a query"], pooling_task="token_embed")
    ]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, atol=1e-6)


def test_a_document_that_is_not_an_image_is_a_400_naming_it(url: str) -> None:
    bad = "data:image/png;base64," + base64.b64encode(b"not a picture").decode()
    body = {"model": "colpali", "query": "q", "documents": [_data_url(PAGES[0]), bad]}
    answer = httpx.post(f"{url}/rerank", json=body)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["message"] == "documents[1]: not a readable image (not a known image format)"
    assert error["param"] == "documents[1]"


def test_a_text_among_the_pages_is_a_400_naming_it(url: str, engine: Engine) -> None:
    """Seen from outside: a plain text document was scored like a page (as a query, by MaxSim) and
    outranked the real pages, with no word of it."""
    body = {"model": "colpali", "query": "q", "documents": [_data_url(PAGES[0]), "just a text document"]}
    answer = httpx.post(f"{url}/rerank", json=body)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["param"] == "documents[1]"
    assert error["message"] == (
        "documents[1]: a page retriever's documents are pages (an image or a rendered PDF page), not text"
    )
    with pytest.raises(InvalidInputError, match=r"^text_2\[0\]: a page retriever's documents are pages"):
        engine.score("q", ["just a text document"])


def test_a_page_retriever_has_no_single_vector_for_embeddings(url: str) -> None:
    answer = httpx.post(f"{url}/v1/embeddings", json={"model": "colpali", "input": ["a query"]})
    assert answer.status_code == 400
    assert "supported tasks: token_embed, score" in answer.json()["error"]["message"]


def test_a_document_sent_as_a_pdf_data_url_is_a_400_saying_pages_are_images(url: str) -> None:
    pdf = "data:application/pdf;base64," + base64.b64encode(b"%PDF-1.7 a whole file").decode()
    body = {"model": "colpali", "query": "q", "documents": [_data_url(PAGES[0]), pdf]}
    answer = httpx.post(f"{url}/rerank", json=body)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == "documents[1]"
    assert error["message"].startswith("documents[1]: a data URL of type application/pdf is not an image")
