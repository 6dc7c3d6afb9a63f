"""A client inherited by forked workers (a ``fork`` Pool, gunicorn ``--preload``, Celery prefork, a
module-level LangChain/LlamaIndex embedder) answers each process its own inputs' vectors."""

from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Iterator

import numpy as np
import pytest

from poolrag import Engine
from poolrag.client import PoolragClient
from poolrag.testing.live_server import serve
from poolrag.testing.rag_corpus import TEXTS

_INHERITED: PoolragClient | None = None  # what a forked worker finds, as a module global of the parent
PASSAGES = [f"{i}: {TEXTS[i % len(TEXTS)]}" for i in range(30)]


@pytest.fixture(scope="module")
def minilm_url(minilm_engine: Engine) -> Iterator[str]:
    yield from serve(minilm_engine, "minilm")


def _embed_in_child(start: int) -> list[np.ndarray]:
    assert _INHERITED is not None
    return [_INHERITED.embed_array(PASSAGES[i : i + 3]) for i in range(start, start + 25)]


@pytest.mark.skipif(sys.platform != "linux", reason="the fork start method is Linux's default")
def test_workers_forked_with_a_warm_connection_each_get_their_own_answers(minilm_url: str) -> None:
    """The parent's pooled keep-alive connection is a socket the children share: writing requests on
    it from several processes, each read another's answer (or a torn one). Each worker opens its own."""
    global _INHERITED
    _INHERITED = PoolragClient(minilm_url, timeout=20)
    try:
        expected = _INHERITED.embed_array(PASSAGES)  # the pool now holds an open connection
        with multiprocessing.get_context("fork").Pool(4) as pool:
            answers = pool.map(_embed_in_child, [0, 1, 2, 3], chunksize=1)
        for start, vectors in zip([0, 1, 2, 3], answers, strict=True):
            for i, got in enumerate(vectors, start):
                np.testing.assert_allclose(got, expected[i : i + 3], atol=1e-6, rtol=0)
        np.testing.assert_allclose(_INHERITED.embed_array(PASSAGES[:3]), expected[:3], atol=1e-6, rtol=0)
    finally:
        _INHERITED.close()
        _INHERITED = None
