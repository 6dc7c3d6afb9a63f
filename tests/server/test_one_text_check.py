"""Each text of a request is checked once (empty? not Unicode?), by the engine's input stage.

The rule (:func:`poolrag.text_validity.text_problem` and its two parts) is wrapped with a counter
wherever a poolrag module holds it, then real requests go through a real server (in this process,
so the counters see it) and through the engine's own methods.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from poolrag import Engine
from poolrag import text_validity as rule

from .conftest import serve_in_thread

RULE_PARTS = ("text_problem", "lone_surrogate", "has_visible_text")


@pytest.fixture
def rule_calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each part of the rule ran, counted in every poolrag module that holds it."""
    calls: Counter[str] = Counter()
    for name in RULE_PARTS:
        original = getattr(rule, name)

        def counted(*args: Any, _name: str = name, _original: Callable[..., Any] = original) -> Any:
            calls[_name] += 1
            return _original(*args)

        for module_name, module in list(sys.modules.items()):
            if module_name.startswith("poolrag") and getattr(module, name, None) is original:
                monkeypatch.setattr(module, name, counted)
    return calls


@pytest.fixture(scope="module")
def url(minilm_engine: Engine) -> Iterator[str]:
    with serve_in_thread(minilm_engine, served_model_names=("minilm",)) as live:
        yield live


def _once_each(calls: Counter[str], texts: int) -> None:
    assert calls == dict.fromkeys(RULE_PARTS, texts)


REQUESTS = [
    ("/v1/embeddings", {"input": ["a cat", "a dog", "a bird"]}, 3),
    ("/v1/embeddings", {"input": "one text"}, 1),
    ("/pooling", {"input": ["a", "b"], "task": "token_embed"}, 2),
    ("/score", {"text_1": "the query", "text_2": ["a", "b", "c"]}, 4),
    ("/score", {"text_1": ["q1", "q2"], "text_2": ["a", "b"]}, 4),
    ("/rerank", {"query": "the query", "documents": ["a", {"text": "b"}]}, 3),
    ("/v2/embed", {"texts": ["a", "b"]}, 2),
    ("/embed", {"inputs": ["a", "b"]}, 2),
    ("/similarity", {"inputs": {"source_sentence": "a", "sentences": ["b", "c"]}}, 3),
    ("/tokenize", {"prompt": "hello there"}, 1),
    ("/tokenize", {"inputs": ["hello", "there"]}, 2),
]


@pytest.mark.parametrize(("path", "body", "texts"), REQUESTS)
def test_a_server_request_checks_each_of_its_texts_once(
    url: str, rule_calls: Counter[str], path: str, body: dict, texts: int
) -> None:
    response = httpx.post(f"{url}{path}", json=body, timeout=120)
    assert response.status_code == 200, response.text
    _once_each(rule_calls, texts)


def test_a_refused_text_is_found_by_that_one_check(url: str, rule_calls: Counter[str]) -> None:
    response = httpx.post(f"{url}/v1/embeddings", json={"input": ["fine", " "]}, timeout=120)
    assert response.status_code == 400
    assert (response.json()["error"]["code"], response.json()["error"]["message"]) == (
        "empty_input",
        "input[1] is empty (only whitespace, control or invisible format characters)",
    )
    assert rule_calls["text_problem"] == 2


def test_the_engines_methods_check_each_text_once(minilm_engine: Engine, rule_calls: Counter[str]) -> None:
    minilm_engine.embed(["a cat", "a dog"])
    _once_each(rule_calls, 2)
    rule_calls.clear()
    asyncio.run(minilm_engine.aembed(["a cat", "a dog", "a bird"]))
    _once_each(rule_calls, 3)
    rule_calls.clear()
    minilm_engine.score("one query", ["a", "b", "c"])  # the query once, not once per document
    _once_each(rule_calls, 4)
    rule_calls.clear()
    minilm_engine.embed_chunks("a document of two chunks", [(0, 10), (11, 24)])
    _once_each(rule_calls, 1)


def test_a_cross_encoder_checks_its_query_once_for_all_documents(
    cross_encoder_engine: Engine, rule_calls: Counter[str]
) -> None:
    cross_encoder_engine.score("one query", ["a", "b", "c"])
    _once_each(rule_calls, 4)
