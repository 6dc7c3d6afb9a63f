"""An engine's life: closed on purpose (``close()``, ``with``), and inherited by a forked worker.

A closed engine refuses work with :class:`poolrag.EngineClosedError`, a ``PoolragError`` like every
error poolrag raises on purpose. A worker forked after the engine ran (gunicorn ``--preload``, Celery
prefork, a ``fork`` Pool) has none of the parent's threads, and may inherit their locks held: it must
answer, not wait forever.
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import pickle
import sys
import weakref
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from poolrag import Engine, EngineClosedError, PoolragError
from poolrag.testing import engine_internals as internals

TEXTS = ["a cat sat on the mat", "tax law", "the quick brown fox"]
_INHERITED: Engine | None = None  # what a forked worker finds, as a module global of the parent


def _embed_in_child(texts: list[str]) -> np.ndarray:
    assert _INHERITED is not None
    return _INHERITED.embed_array(texts)


def test_a_closed_engine_refuses_work_sync_and_async(tiny_model: Callable[..., Path]) -> None:
    with Engine(tiny_model("bert")) as engine:
        assert engine.embed_array(TEXTS).shape[0] == len(TEXTS)
    with pytest.raises(EngineClosedError, match="the engine is closed") as caught:
        engine.embed_array(TEXTS)
    assert isinstance(caught.value, PoolragError)
    with pytest.raises(EngineClosedError):
        asyncio.run(engine.aembed_array(TEXTS))
    engine.close()  # closing again is harmless


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "dropped"])
def test_an_engine_let_go_frees_its_tokenizer(tiny_model: Callable[..., Path], closed: bool) -> None:
    """A notebook re-running ``Engine(...)`` in a cell: each engine let go must take its tokenizer
    (its vocabulary, megabytes for a real model) with it, not leave one behind per run."""
    engine = Engine(tiny_model("bert"))
    engine.embed_array(TEXTS)
    tokenizer = weakref.ref(engine.tokenizer)
    if closed:
        engine.close()
    del engine
    gc.collect()
    assert tokenizer() is None


@pytest.mark.skipif(sys.platform != "linux", reason="the fork start method is Linux's default")
@pytest.mark.parametrize("mid_batch", [False, True], ids=["idle", "mid-batch"])
def test_a_worker_forked_after_the_engine_ran_answers_as_the_parent_does(
    tiny_model: Callable[..., Path], mid_batch: bool
) -> None:
    """``mid-batch``: the parent's forward thread holds the model's batch lock at the fork, as a
    busy engine's does; the child must not inherit it held."""
    global _INHERITED
    _INHERITED = Engine(tiny_model("bert"))
    batch_lock = internals.runner(_INHERITED)._batch_lock
    try:
        expected = _INHERITED.embed_array(TEXTS)  # the parent's threads exist now
        if mid_batch:
            batch_lock.acquire()
        try:
            with multiprocessing.get_context("fork").Pool(1) as pool:
                got = pool.apply_async(_embed_in_child, (TEXTS,)).get(timeout=120)
        finally:
            if mid_batch:
                batch_lock.release()
        np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)
        assert np.array_equal(_INHERITED.embed_array(TEXTS), expected)  # the parent is untouched
    finally:
        _INHERITED.close()
        _INHERITED = None


def _unpickle_in_child(pickled: bytes) -> tuple[bool, np.ndarray]:
    engine = pickle.loads(pickled)
    return engine is _INHERITED, engine.embed_array(TEXTS)


@pytest.mark.skipif(sys.platform != "linux", reason="the fork start method is Linux's default")
def test_an_engine_sent_to_a_forked_worker_is_the_one_it_inherited(tiny_model: Callable[..., Path]) -> None:
    """LlamaIndex's ``IngestionPipeline.arun(num_workers=2)`` forks workers, then sends them the
    engine pickled: loading it again there hung forever (GNU OpenMP does not survive a fork) and
    would have doubled the memory. The worker uses the engine it inherited."""
    global _INHERITED
    _INHERITED = Engine(tiny_model("bert"))
    try:
        expected = _INHERITED.embed_array(TEXTS)  # the parent's threads (torch's too) have run
        with multiprocessing.get_context("fork").Pool(1) as pool:
            inherited, got = pool.apply_async(_unpickle_in_child, (pickle.dumps(_INHERITED),)).get(
                timeout=120
            )
        assert inherited
        np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)
        assert pickle.loads(pickle.dumps(_INHERITED)) is not _INHERITED  # in its own process: loaded again
    finally:
        _INHERITED.close()
        _INHERITED = None
