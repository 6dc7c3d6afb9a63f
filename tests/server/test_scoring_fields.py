"""vLLM's scoring fields on ``/score`` and ``/rerank`` (its ``ScoringRequestMixin``): each was a 400.

``max_tokens_per_query`` / ``max_tokens_per_doc`` cut each side to its first tokens before it is
scored; ``instruction`` and ``chat_template_kwargs`` fill the model's score template (an LLM
reranker's, e.g. Qwen3-Reranker's ``{{ instruction }}``), and are refused where no template formats
the pairs, since they would change nothing there.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import numpy as np
import pytest
import transformers
from decoders.tiny_decoders import build

from poolrag import Engine
from poolrag.tokenization.score_template import load_score_template
from poolrag.tokenization.text_cut import text_cut_of

from .conftest import Served, serve_in_thread

QUERY = "Where does the cat sit on sunny afternoons?"
TEXTS = ["The cat sat on the warm mat by the window.", "Paris is the capital and largest city of France."]
INSTRUCTION = "Given a question about pets, find the passage that answers it"


@pytest.fixture(scope="module")
def reranker_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("qwen3-reranker")
    build(folder, "qwen3", transformers.AutoModelForCausalLM, tokenizer_kwargs={"add_bos": False})
    engine = Engine(
        folder,
        convert="classify",
        score_template="qwen3_reranker",
        hf_overrides={"classifier_from_token": ["no", "yes"]},
    )
    with serve_in_thread(engine) as url:
        yield Served(url, "test-model", engine)


def _scores(answer: httpx.Response) -> list[float]:
    assert answer.status_code == 200, answer.text
    body = answer.json()
    if "results" in body:
        return [r["relevance_score"] for r in sorted(body["results"], key=lambda r: r["index"])]
    return [d["score"] for d in sorted(body["data"], key=lambda d: d["index"])]


def test_instruction_fills_the_score_template(reranker_server: Served, http: httpx.Client) -> None:
    template = load_score_template("qwen3_reranker")
    engine = reranker_server.engine
    told = [
        s.outputs.score
        for s in engine.score(QUERY, TEXTS, score_template=template.with_variables(instruction=INSTRUCTION))
    ]
    plain = [s.outputs.score for s in engine.score(QUERY, TEXTS)]
    assert not np.allclose(told, plain)  # the instruction is in the prompt the model reads
    url = reranker_server.url
    for body in (
        {"text_1": QUERY, "text_2": TEXTS, "instruction": INSTRUCTION},
        {"text_1": QUERY, "text_2": TEXTS, "chat_template_kwargs": {"instruction": INSTRUCTION}},
        # a key of chat_template_kwargs wins over instruction, as vLLM merges them
        {
            "text_1": QUERY,
            "text_2": TEXTS,
            "instruction": "ignored",
            "chat_template_kwargs": {"instruction": INSTRUCTION},
        },
    ):
        np.testing.assert_allclose(_scores(http.post(f"{url}/score", json=body)), told, rtol=1e-5, atol=1e-6)
    rerank = {"query": QUERY, "documents": TEXTS, "instruction": INSTRUCTION}
    np.testing.assert_allclose(_scores(http.post(f"{url}/rerank", json=rerank)), told, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        _scores(http.post(f"{url}/score", json={"text_1": QUERY, "text_2": TEXTS})),
        plain,
        rtol=1e-5,
        atol=1e-6,
    )


def test_template_variables_without_a_template_are_refused(minilm_server: Served, http: httpx.Client) -> None:
    for path, body in (
        ("/score", {"text_1": QUERY, "text_2": TEXTS}),
        ("/rerank", {"query": QUERY, "documents": TEXTS}),
    ):
        for field, value in (
            ("instruction", INSTRUCTION),
            ("chat_template_kwargs", {"instruction": INSTRUCTION}),
        ):
            answer = http.post(f"{minilm_server.url}{path}", json={**body, field: value})
            assert answer.status_code == 400, answer.text
            assert field in answer.json()["error"]["message"]
        # null and empty ask for nothing, as a dumped vLLM request sends them
        empty = {**body, "instruction": None, "chat_template_kwargs": {}}
        assert http.post(f"{minilm_server.url}{path}", json=empty).status_code == 200


def test_max_tokens_per_query_and_doc_cut_each_side(minilm_server: Served, http: httpx.Client) -> None:
    engine = minilm_server.engine
    cut = text_cut_of(engine.tokenizer)
    expected = [s.outputs.score for s in engine.score(cut.first(QUERY, 3), [cut.first(t, 4) for t in TEXTS])]
    assert not np.allclose(expected, [s.outputs.score for s in engine.score(QUERY, TEXTS)])
    limits = {"max_tokens_per_query": 3, "max_tokens_per_doc": 4}
    score = http.post(f"{minilm_server.url}/score", json={"text_1": QUERY, "text_2": TEXTS, **limits})
    np.testing.assert_allclose(_scores(score), expected, rtol=1e-5, atol=1e-6)
    rerank = http.post(f"{minilm_server.url}/rerank", json={"query": QUERY, "documents": TEXTS, **limits})
    np.testing.assert_allclose(_scores(rerank), expected, rtol=1e-5, atol=1e-6)
    # 0, vLLM's default, cuts nothing; a negative count is a 400 naming the field
    zero = http.post(
        f"{minilm_server.url}/score", json={"text_1": QUERY, "text_2": TEXTS, "max_tokens_per_query": 0}
    )
    np.testing.assert_allclose(
        _scores(zero), [s.outputs.score for s in engine.score(QUERY, TEXTS)], rtol=1e-5
    )
    bad = http.post(
        f"{minilm_server.url}/score", json={"text_1": QUERY, "text_2": TEXTS, "max_tokens_per_doc": -1}
    )
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "max_tokens_per_doc"
