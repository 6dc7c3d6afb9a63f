"""The engine core: many callers, one worker, batches across callers, results to the right caller.

fp32 results depend on the shape of the batch a text ran in by ~1e-7 (GEMM blocking, a GEMV for a
single row), so results are compared bit for bit where the batches are the same and to 1e-6
where concurrency grouped texts differently; every comparison also checks that each caller got the
vector of its own text, not a neighbour's.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from poolrag import Engine
from poolrag.core.engine_core import EngineCore
from poolrag.errors import EngineClosedError, OutOfMemoryError
from poolrag.request import ResolvedParams
from poolrag.testing import engine_internals as internals

TEXTS = [
    f"caller {i} asks about "
    + " ".join(["retrieval", "pooling", "vectors", "batches"][: 1 + i % 4]) * (1 + i % 9)
    for i in range(48)
]


@pytest.fixture(scope="module")
def engine(tiny_model: Callable[..., Path]) -> Engine:
    return Engine(tiny_model("bert"))


@pytest.fixture(scope="module")
def reference(engine: Engine) -> np.ndarray:
    """Every text embedded alone, through the sync API."""
    return np.stack([engine.embed_array([t])[0] for t in TEXTS])


def _core(engine: Engine) -> EngineCore:
    return internals.core(engine)


@contextmanager
def gated(core: EngineCore) -> Iterator[tuple[threading.Event, list[list[Any]]]]:
    """Hold the worker inside its next forward pass until the gate opens; record every batch."""
    gate = threading.Event()
    entered = threading.Event()
    batches: list[list[Any]] = []
    runner = core.runner
    original = runner.run_prepared

    def held(batch: Any, inputs: Any) -> Any:
        batches.append(list(batch))
        entered.set()
        gate.wait(30)
        return original(batch, inputs)

    runner.run_prepared = held  # type: ignore[method-assign]
    try:
        yield gate, batches
    finally:
        gate.set()
        del runner.run_prepared


def _assert_own_results(got: np.ndarray, reference: np.ndarray) -> None:
    np.testing.assert_allclose(got, reference, rtol=0, atol=1e-6)
    distance = np.abs(got[:, None, :] - reference[None, :, :]).max(axis=-1)  # L∞, every pair
    assert (distance.argmin(axis=1) == np.arange(len(got))).all()  # nearest is its own text's
    mixed_up = distance + np.eye(len(got)) * 1e9
    assert mixed_up.min() > 1e-5  # and every other text's vector is ten tolerances away


def test_results_come_back_in_input_order(engine: Engine, reference: np.ndarray) -> None:
    order = np.random.default_rng(0).permutation(len(TEXTS))
    shuffled = engine.embed_array([TEXTS[i] for i in order])
    _assert_own_results(shuffled, reference[order])


def test_duplicates_in_one_call_are_computed_once(engine: Engine) -> None:
    core = _core(engine)
    before = core.stats.sequences
    out = engine.embed_array([TEXTS[0], TEXTS[1], TEXTS[0], TEXTS[0]])
    assert core.stats.sequences - before == 2
    assert np.array_equal(out[0], out[2]) and np.array_equal(out[0], out[3])


def test_many_threads_each_get_their_own_results(engine: Engine, reference: np.ndarray) -> None:
    with ThreadPoolExecutor(max_workers=32) as pool:
        results = list(pool.map(lambda t: engine.embed_array([t])[0], TEXTS))
    _assert_own_results(np.stack(results), reference)


def test_many_asyncio_tasks_each_get_their_own_results(engine: Engine, reference: np.ndarray) -> None:
    async def main() -> list[np.ndarray]:
        return await asyncio.gather(*(engine.aembed_array([t]) for t in TEXTS))

    got = np.concatenate(asyncio.run(main()))
    _assert_own_results(got, reference)


def test_threads_and_asyncio_tasks_together(engine: Engine, reference: np.ndarray) -> None:
    half = len(TEXTS) // 2

    async def main() -> list[np.ndarray]:
        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(max_workers=16) as pool:
            threaded = [loop.run_in_executor(pool, engine.embed_array, [t]) for t in TEXTS[:half]]
            tasks = [engine.aembed_array([t]) for t in TEXTS[half:]]
            return list(await asyncio.gather(*threaded, *tasks))

    got = np.concatenate(asyncio.run(main()))
    _assert_own_results(got, reference)


def test_callers_sharing_inputs_get_bit_identical_results_to_the_sync_path(engine: Engine) -> None:
    """Same inputs → same batches → the very same bits, however many callers ask at once."""
    texts = TEXTS[:6]
    expected = engine.embed_array(texts)

    async def main() -> list[np.ndarray]:
        return await asyncio.gather(*(engine.aembed_array(texts) for _ in range(8)))

    with ThreadPoolExecutor(max_workers=8) as pool:
        threaded = list(pool.map(lambda _: engine.embed_array(texts), range(8)))
    for got in threaded + asyncio.run(main()):
        assert np.array_equal(got, expected)
    # each caller owns its array: changing one leaves the others alone
    threaded[0][:] = 0
    assert np.array_equal(threaded[1], expected)


def test_queued_callers_are_batched_together(engine: Engine, reference: np.ndarray) -> None:
    core = _core(engine)
    with gated(core) as (gate, batches), ThreadPoolExecutor(max_workers=17) as pool:
        first = pool.submit(engine.embed_array, ["the worker is busy with this one"])
        while not batches:
            threading.Event().wait(0.001)
        futures = [pool.submit(engine.embed_array, [t]) for t in TEXTS[:16]]
        while sum(1 for job, _ in core._inbox) < 16:  # all sixteen queued behind the busy worker
            threading.Event().wait(0.001)
        gate.set()
        results = [f.result(timeout=30)[0] for f in futures]
        first.result(timeout=30)
    _assert_own_results(np.stack(results), reference[:16])
    assert len(batches) - 1 < 16  # sixteen callers, fewer forward passes
    assert max(len(b) for b in batches[1:]) > 1


def test_one_callers_texts_are_batched_with_their_neighbours_in_length(
    tiny_model: Callable[..., Path],
) -> None:
    """However a caller orders its texts, each batch holds a contiguous slice of them sorted by length
    (so padded attention wastes nothing and equal lengths share one attention call)."""
    engine = Engine(tiny_model("bert"), max_batch_tokens=512)
    texts = [" ".join(["word"] * n) for n in np.random.default_rng(1).permutation(np.arange(1, 101))]
    with gated(internals.core(engine)) as (gate, batches):
        gate.set()
        vectors = engine.embed_array(texts)
    assert len(batches) > 4
    lengths = [sorted(r.num_tokens for r in batch) for batch in batches]
    assert sum(len(batch) for batch in batches) == len(texts)  # each text ran once
    for longer, shorter in itertools.pairwise(lengths):
        assert shorter[-1] <= longer[0]  # longest first, no two batches interleave
    np.testing.assert_allclose(vectors[3], engine.embed_array([texts[3]])[0], rtol=0, atol=1e-6)


def test_a_query_sent_behind_a_bulk_call_waits_about_one_batch(tiny_model: Callable[..., Path]) -> None:
    """A RAG app ingesting and answering on one engine: a query sent while a 400-text call runs is
    answered within a batch or two of it, not after all 50 (first come, first served made a user
    wait 51 s behind a 1,500-text aembed_documents). The bulk call still gets every vector."""
    engine = Engine(tiny_model("bert"), max_batch_size=8)
    core = internals.core(engine)
    bulk_texts = [f"bulk text {i} " + "words " * (i % 7) for i in range(400)]
    with gated(core) as (gate, batches), ThreadPoolExecutor(max_workers=2) as pool:
        bulk = pool.submit(engine.embed_array, bulk_texts)
        while not batches:  # the bulk call's first batch is in the model
            threading.Event().wait(0.001)
        query = pool.submit(engine.embed_array, ["the user's question"])
        while not core._inbox:  # queued behind it
            threading.Event().wait(0.001)
        gate.set()
        answer = query.result(timeout=60)
        vectors = bulk.result(timeout=120)
    # the batch that carried the query, by its tokens (counting batches once the answer is back also
    # counted those the worker ran while this thread was waking up: flaky on a busy machine)
    question = tuple(
        internals.processor(engine).texts(["the user's question"], ResolvedParams("embed"), None, None)
    )
    carried = [
        i for i, batch in enumerate(batches) if any(r.token_ids == question[0].token_ids for r in batch)
    ]
    assert len(batches) >= 50 and carried and carried[0] <= 3  # the first batch of 50 or up to 3 after it
    np.testing.assert_allclose(answer[0], engine.embed_array(["the user's question"])[0], rtol=0, atol=1e-6)
    np.testing.assert_allclose(vectors[123], engine.embed_array([bulk_texts[123]])[0], rtol=0, atol=1e-6)


def test_cancelled_work_never_reaches_the_model(engine: Engine) -> None:
    core = _core(engine)
    dropped_before = core.stats.dropped
    params = ResolvedParams(task="embed", normalize=True)
    requests = internals.processor(engine).texts([f"cancel me {i}" for i in range(40)], params, None, None)
    with gated(core) as (gate, batches):
        busy = core.submit(internals.processor(engine).texts(["busy"], params, None, None))
        while not batches:
            threading.Event().wait(0.001)
        doomed = core.submit(requests)
        assert doomed.cancel()
        gate.set()
        busy.result(timeout=30)
        survivor = engine.embed_array(["after the cancellation"])
    seen = {r for batch in batches for r in batch}
    assert not seen & set(requests)
    assert core.stats.dropped - dropped_before == len(requests)
    assert survivor.shape == (1, engine.embedding_dim)
    with pytest.raises(CancelledError):
        doomed.result()


def test_cancelling_an_asyncio_task_drops_its_queued_work(engine: Engine) -> None:
    core = _core(engine)
    texts = [f"async cancel {i}" for i in range(30)]

    async def main() -> np.ndarray:
        with gated(core) as (gate, batches):
            busy = asyncio.ensure_future(engine.aembed_array(["busy again"]))
            while not batches:
                await asyncio.sleep(0.001)
            task = asyncio.ensure_future(engine.aembed_array(texts))
            await asyncio.sleep(0.05)  # queued behind the busy worker
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            gate.set()
            await busy
        seen = {tuple(r.token_ids) for batch in batches for r in batch}
        wanted = {tuple(engine.tokenize(t)) for t in texts}
        assert not seen & wanted
        return await engine.aembed_array(["still serving"])

    assert asyncio.run(main()).shape == (1, engine.embedding_dim)


def test_cancelling_an_asyncio_call_of_images_stops_sending_them(
    tmp_path_factory: pytest.TempPathFactory, minilm_path: Path
) -> None:
    """A call's images go to the core from a thread as they are prepared: cancelling the awaiting
    task (a wait_for timeout, a server client that left) stopped only the await, and the thread
    sent every remaining image on to the model (400 of 400 ran)."""
    from PIL import Image

    from poolrag.testing.tiny_models import build_clip

    engine = Engine(build_clip(tmp_path_factory.mktemp("clip"), minilm_path))
    core = _core(engine)
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)) for _ in range(400)]
    reference = engine.embed_array(images[:3])

    async def main() -> None:
        with gated(core) as (gate, batches):
            task = asyncio.ensure_future(engine.aembed_array(images))
            while not batches:  # the first part is in the model
                await asyncio.sleep(0.001)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            gate.set()

    before = core.stats.sequences
    asyncio.run(main())
    internals.executor(engine)._threads().shutdown(wait=True)  # the call's thread has returned
    assert core.stats.sequences - before < len(images) / 2
    np.testing.assert_allclose(engine.embed_array(images[:3]), reference, rtol=0, atol=1e-6)
    engine.close()


def test_a_failing_batch_fails_only_its_callers(engine: Engine) -> None:
    core = _core(engine)
    runner = core.runner
    original = runner.run_prepared
    calls = {"n": 0}

    def fail_once(batch: Any, inputs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("device fell over")
        return original(batch, inputs)

    runner.run_prepared = fail_once  # type: ignore[method-assign]
    try:
        with pytest.raises(RuntimeError, match="device fell over"):
            engine.embed_array(["the unlucky one"])
        assert engine.embed_array(["the next caller"]).shape == (1, engine.embedding_dim)
    finally:
        del runner.run_prepared


class MemoryCap(torch.nn.Module):
    """The model, raising CUDA's out-of-memory error for a batch over ``max_tokens`` tokens."""

    def __init__(self, model: torch.nn.Module, max_tokens: int) -> None:
        super().__init__()
        self.inner, self.max_tokens, self.config = model, max_tokens, model.config

    def forward(self, **kwargs: Any) -> Any:
        if kwargs["input_ids"].numel() > self.max_tokens:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return self.inner(**kwargs)


def test_an_input_too_big_for_memory_fails_only_its_caller(tiny_model: Callable[..., Path]) -> None:
    """Another caller's text batched with it is answered (it failed with it before)."""
    engine = Engine(tiny_model("bert"))
    core = _core(engine)
    expected = engine.embed_array(["a short question"])
    core.runner.model = MemoryCap(core.runner.model, max_tokens=30)
    with gated(core) as (gate, batches), ThreadPoolExecutor(max_workers=3) as pool:
        first = pool.submit(engine.embed_array, ["the worker is busy"])
        while not batches:
            threading.Event().wait(0.001)
        too_big = pool.submit(engine.embed_array, ["word " * 40])
        short = pool.submit(engine.embed_array, ["a short question"])
        while sum(1 for job, _ in core._inbox) < 2:  # both queued behind the busy worker
            threading.Event().wait(0.001)
        gate.set()
        first.result(timeout=30)
        with pytest.raises(OutOfMemoryError, match="one input of 42 tokens"):
            too_big.result(timeout=30)
        np.testing.assert_allclose(short.result(timeout=30), expected, rtol=0, atol=1e-6)
    assert any(len(batch) == 2 for batch in batches)  # the two callers' texts ran as one batch
    engine.close()


def test_closed_core_refuses_work_and_fails_what_was_queued(tiny_model: Callable[..., Path]) -> None:
    engine = Engine(tiny_model("bert"))
    core = _core(engine)
    params = ResolvedParams(task="embed")
    with gated(core) as (gate, batches):
        busy = core.submit(internals.processor(engine).texts(["busy"], params, None, None))
        while not batches:
            threading.Event().wait(0.001)
        queued = core.submit(internals.processor(engine).texts(["queued"], params, None, None))
        closer = threading.Thread(target=core.close)
        closer.start()
        while not core.closed:
            threading.Event().wait(0.001)
        gate.set()
        closer.join(30)
    busy.result(timeout=30)  # the batch already running finishes
    with pytest.raises(EngineClosedError):
        queued.result(timeout=30)
    with pytest.raises(EngineClosedError):
        engine.embed_array(["too late"])


def test_a_scheduler_stopped_by_a_fault_fails_the_call_it_was_admitting_and_says_it_stopped(
    tiny_model: Callable[..., Path],
) -> None:
    """A fault outside a batch stops the scheduler thread: the call it was admitting waited forever
    (taken from the inbox, never failed), and the engine must say it stopped (a server's /health
    said ok meanwhile)."""
    engine = Engine(tiny_model("bert"))
    core = _core(engine)

    def fault(*_: Any) -> None:
        raise RuntimeError("a bug in the scheduler")

    core._admit = fault  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="a bug in the scheduler"):
        engine.embed_array(["the caller the fault reached"])
    assert engine.closed
    with ThreadPoolExecutor(1) as pool:  # answered at once, not left waiting
        later = pool.submit(engine.embed_array, ["a later caller"])
        with pytest.raises(EngineClosedError):
            later.result(timeout=30)


def test_empty_submissions_resolve_at_once(engine: Engine) -> None:
    assert _core(engine).submit([]).result(timeout=1) == []
    assert engine.embed_array([]).shape == (0, engine.embedding_dim)
