"""The server takes an :class:`~poolrag.backend.InProcessEngine`, not the concrete Engine.

It is served here through a stand-in that has the protocol's members and nothing else (each
delegating to a real engine): every route answers as over the engine itself, so no route reaches
for a name the protocol does not promise (the engine's wiring, its options, ``model_name``...).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import httpx
import numpy as np
import pytest

from poolrag import Engine
from poolrag.backend import InProcessEngine, PoolingBackend, PoolingEngine
from poolrag.client import PoolragClient
from poolrag.testing.live_server import serve

TEXTS = ["Paris is the capital of France.", "Mitochondria make energy.", "Hi"]
QUERY = "Which city is the capital of France?"


def protocol_members(protocol: type) -> set[str]:
    """The public names a protocol and the protocols it extends declare."""
    names: set[str] = set()
    for cls in protocol.__mro__:
        if getattr(cls, "_is_protocol", False) and cls is not Protocol:
            names |= {name for name in vars(cls) if not name.startswith("_")}
    return names


def _delegate(name: str) -> Any:
    """A property where the protocol declares one, else a method, reading ``self.inner``."""
    if isinstance(inspect.getattr_static(InProcessEngine, name), property):
        return property(lambda self: getattr(self.inner, name))
    return lambda self, *args, **kwargs: getattr(self.inner, name)(*args, **kwargs)


def protocol_only(engine: Engine) -> InProcessEngine:
    """An object with exactly :class:`InProcessEngine`'s members, answered by ``engine``."""
    members = {name: _delegate(name) for name in protocol_members(InProcessEngine)}
    cls = type("ProtocolOnly", (), {"__slots__": ("inner",), **members})
    stand_in = cls()
    stand_in.inner = engine
    return stand_in


def test_the_stand_in_has_the_protocols_members_and_no_engine_internals(minilm_engine: Engine) -> None:
    members = protocol_members(InProcessEngine)
    assert {"embed", "aclassify", "score", "encode", "tokenize", "facts", "tokenizer"} <= members
    assert {"max_batch_tokens", "frame_token_ids", "core_stats", "embed_array"} <= members
    assert protocol_members(PoolingBackend) < protocol_members(PoolingEngine) < members
    stand_in = protocol_only(minilm_engine)
    assert isinstance(stand_in, InProcessEngine)
    for name in ("pipeline", "_pipeline", "model_name", "max_model_len", "supported_tasks", "spec"):
        assert not hasattr(stand_in, name)


@pytest.fixture(scope="module")
def cross_encoder_engine(tiny_model: Callable[..., Path]) -> Engine:
    return Engine(tiny_model("bert", head="sequence", num_labels=1))


@pytest.fixture(scope="module")
def minilm_client(minilm_engine: Engine) -> Iterator[PoolragClient]:
    for url in serve(protocol_only(minilm_engine), "minilm"):
        with PoolragClient(url, model="minilm") as client:
            yield client


@pytest.fixture(scope="module")
def reranker_client(cross_encoder_engine: Engine) -> Iterator[PoolragClient]:
    for url in serve(protocol_only(cross_encoder_engine), "reranker"):
        with PoolragClient(url, model="reranker") as client:
            yield client


def test_every_route_answers_over_the_protocol_as_over_the_engine(
    minilm_engine: Engine, minilm_client: PoolragClient
) -> None:
    client = minilm_client
    assert client.facts == minilm_engine.facts.renamed("minilm")
    np.testing.assert_allclose(client.embed_array(TEXTS), minilm_engine.embed_array(TEXTS), atol=1e-6)
    np.testing.assert_allclose(
        client.score_array(QUERY, TEXTS), minilm_engine.score_array(QUERY, TEXTS), atol=1e-6
    )
    for got, want in zip(
        client.encode_arrays(TEXTS, "token_embed"),
        minilm_engine.encode_arrays(TEXTS, "token_embed"),
        strict=True,
    ):
        np.testing.assert_allclose(got, want, atol=1e-6)
    assert client.tokenize(TEXTS[0]) == minilm_engine.tokenize(TEXTS[0])
    assert client.tokenize(TEXTS[0], add_special_tokens=False) == minilm_engine.tokenize(
        TEXTS[0], add_special_tokens=False
    )
    answer = httpx.post(f"{client.base_url}/tokenize", json={"prompt": TEXTS[0], "return_token_strs": True})
    assert answer.json()["token_strs"] == minilm_engine.tokenizer.convert_ids_to_tokens(
        minilm_engine.tokenize(TEXTS[0])
    )
    assert answer.json()["max_model_len"] == minilm_engine.max_model_len
    metrics = httpx.get(f"{client.base_url}/metrics").text
    assert "poolrag_engine_batches_total" in metrics


def test_classify_and_rerank_answer_over_the_protocol(
    cross_encoder_engine: Engine, reranker_client: PoolragClient
) -> None:
    for got, want in zip(reranker_client.classify(TEXTS), cross_encoder_engine.classify(TEXTS), strict=True):
        np.testing.assert_allclose(got.outputs.probs, want.outputs.probs, atol=1e-6)
    expected = cross_encoder_engine.score_array(QUERY, TEXTS)
    ranked = reranker_client.rerank(QUERY, TEXTS)
    assert [r.index for r in ranked] == list(np.argsort(-expected, kind="stable"))
    np.testing.assert_allclose([r.score for r in ranked], np.sort(expected)[::-1], atol=1e-6)
