"""Running out of memory on a batch splits it and retries; the caller never sees the error."""

from __future__ import annotations

import itertools
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from poolrag import Engine, OutOfMemoryError
from poolrag.request import PoolingRequest, ResolvedParams
from poolrag.runner.oom import is_out_of_memory
from poolrag.testing import engine_internals as internals

PARAMS = ResolvedParams(task="embed")
TEXTS = [f"text number {i} " + "word " * (i % 17) for i in range(24)]


class MemoryBudget(nn.Module):
    """Wraps a model and raises CUDA's out-of-memory error for batches over ``max_tokens``
    (as a too-small GPU would; a test may change it, as memory another process holds comes and
    goes), recording the size of every batch it is asked to run and which of them ran out."""

    def __init__(
        self, model: nn.Module, max_tokens: int, error: type[BaseException] = torch.OutOfMemoryError
    ):
        super().__init__()
        self.inner = model
        self.max_tokens = max_tokens
        self.error = error
        self.seen: list[int] = []
        self.ran_out: list[int] = []  # indexes into ``seen``
        self.config = model.config

    def forward(self, **kwargs: Any) -> Any:
        tokens = kwargs["input_ids"].numel()
        self.seen.append(tokens)
        if tokens > self.max_tokens:
            self.ran_out.append(len(self.seen) - 1)
            raise self.error(f"CUDA out of memory. Tried to allocate a batch of {tokens} tokens")
        return self.inner(**kwargs)


def _requests(engine: Engine) -> list[PoolingRequest]:
    return internals.processor(engine).texts(TEXTS, PARAMS, None, None)


@pytest.fixture
def engine(tiny_model: Callable[..., Path]) -> Engine:
    return Engine(tiny_model("bert"))


def test_runner_splits_a_batch_that_runs_out_of_memory(engine: Engine) -> None:
    runner = internals.runner(engine)
    batch = _requests(engine)
    reference = runner.forward(batch).tokens
    budget = MemoryBudget(runner.model, max_tokens=60)
    runner.model = budget
    split = runner.forward(batch).tokens
    assert reference is not None and split is not None
    torch.testing.assert_close(split.states, reference.states, rtol=0, atol=1e-5)
    assert torch.equal(split.lengths, reference.lengths)
    assert torch.equal(split.token_ids, reference.token_ids)
    assert max(budget.seen) > 60  # the first try was too big ...
    assert sum(1 for n in budget.seen if n <= 60) >= 2  # ... and halves ran instead
    assert runner.oom_budget.limit is not None and runner.token_budget(16384) <= 60


def test_engine_callers_get_results_despite_a_small_memory_budget(engine: Engine) -> None:
    reference = engine.embed_array(TEXTS)
    runner = internals.runner(engine)
    runner.model = MemoryBudget(runner.model, max_tokens=40)
    again = engine.embed_array(TEXTS)
    np.testing.assert_allclose(again, reference, rtol=0, atol=1e-5)
    # later batches are planned under the lowered budget: no more failed attempts
    runner.model.seen.clear()
    engine.embed_array([t + " again" for t in TEXTS])
    assert all(n <= 40 for n in runner.model.seen)


PLANNED = 512  # tokens per batch (the tiny model's longest input): TEXTS (277 tokens) in one batch
LIMIT = 200  # tokens a batch may have while memory is short: TEXTS in two or three batches


def _serve(
    engine: Engine,
    budget: MemoryBudget,
    batches: int,
    reference: np.ndarray,
    until: Callable[[], bool] = lambda: False,
) -> None:
    """Embed TEXTS over and over until the model has been asked to run ``batches`` batches (or
    ``until()``), each call's vectors those of a run that never ran out of memory."""
    while len(budget.seen) < batches and not until():
        np.testing.assert_allclose(engine.embed_array(TEXTS), reference, rtol=0, atol=1e-5)


def test_the_budget_grows_back_after_a_brief_memory_shortage(tiny_model: Callable[..., Path]) -> None:
    """Another process held memory for one call: later batches were planned at half the smallest
    batch that ran out for the engine's whole life, a server's throughput lost for good."""
    engine = Engine(tiny_model("bert"), max_batch_tokens=PLANNED)
    reference = engine.embed_array(TEXTS)
    runner = internals.runner(engine)
    runner.model = budget = MemoryBudget(runner.model, max_tokens=LIMIT)
    np.testing.assert_allclose(engine.embed_array(TEXTS), reference, rtol=0, atol=1e-5)
    assert budget.ran_out and runner.token_budget(PLANNED) < LIMIT
    budget.max_tokens = 1 << 30  # the memory is back
    _serve(engine, budget, 500, reference, until=lambda: runner.oom_budget.limit is None)
    assert runner.oom_budget.limit is None and runner.token_budget(PLANNED) == PLANNED
    engine.embed_array(TEXTS)
    assert budget.seen[-1] > LIMIT  # one batch, as before the shortage


def test_a_device_too_small_for_the_budget_splits_ever_more_rarely(tiny_model: Callable[..., Path]) -> None:
    """The budget is tried again now and then, in case memory came back; each try that still runs
    out waits twice as long for the next, so a batch splits a handful of times in hundreds."""
    engine = Engine(tiny_model("bert"), max_batch_tokens=PLANNED)
    reference = engine.embed_array(TEXTS)
    runner = internals.runner(engine)
    runner.model = budget = MemoryBudget(runner.model, max_tokens=LIMIT)
    _serve(engine, budget, 260, reference)
    splits = [i for i in budget.ran_out if i - 1 not in budget.ran_out]  # the halves fit: one each
    gaps = [b - a for a, b in itertools.pairwise(splits)]
    assert len(gaps) == 2, splits  # the first shortage, and two tries of a larger budget since ...
    assert gaps[1] > 1.5 * gaps[0], gaps  # ... the second after twice as long
    assert runner.token_budget(PLANNED) < LIMIT


def test_cpu_allocation_failures_split_too(engine: Engine) -> None:
    runner = internals.runner(engine)
    batch = _requests(engine)[:8]
    reference = runner.forward(batch).tokens
    runner.model = MemoryBudget(runner.model, max_tokens=30, error=MemoryError)
    split = runner.forward(batch).tokens
    assert reference is not None and split is not None
    torch.testing.assert_close(split.states, reference.states, rtol=0, atol=1e-5)


def test_a_single_sequence_that_does_not_fit_fails_clearly(engine: Engine) -> None:
    runner = internals.runner(engine)
    runner.model = MemoryBudget(runner.model, max_tokens=2)
    with pytest.raises(OutOfMemoryError, match=r"out of memory running one input of \d+ tokens") as failed:
        engine.embed_array(["one sequence too long for the memory budget"])
    assert isinstance(failed.value.__cause__, torch.OutOfMemoryError)
    again = pickle.loads(pickle.dumps(failed.value))  # as it comes back from a worker process
    assert type(again) is OutOfMemoryError and str(again) == str(failed.value)
    runner.model = runner.model.inner
    assert engine.embed_array(["it works again"]).shape == (1, engine.embedding_dim)


def test_an_input_too_big_even_alone_leaves_the_token_budget_as_it_was(engine: Engine) -> None:
    """Its batch splits down to it alone, where it fails: that says nothing of how big a batch of
    other inputs may be, so later batches keep the configured budget (they were planned at half
    the failed pair's tokens, for the engine's whole life)."""
    runner = internals.runner(engine)
    processor = internals.processor(engine)
    long = processor.texts(["word " * 40], PARAMS, None, None)
    short = processor.texts(["a", "b", "c"], PARAMS, None, None)
    runner.model = MemoryBudget(runner.model, max_tokens=30)
    with pytest.raises(OutOfMemoryError):
        runner.forward([*long, *short])
    assert runner.oom_budget.limit is None and runner.token_budget(4096) == 4096
    assert runner.forward(short).tokens is not None


def test_other_errors_are_not_mistaken_for_out_of_memory(engine: Engine) -> None:
    runner = internals.runner(engine)
    runner.model = MemoryBudget(runner.model, max_tokens=0, error=ValueError)
    with pytest.raises(ValueError):
        runner.forward(_requests(engine)[:4])
    assert runner.model.seen == [runner.model.seen[0]]  # no retries


@pytest.mark.parametrize(
    "message",
    [
        # what a server capped by RLIMIT_AS met: oneDNN found no room for a primitive's code
        "could not create a primitive",
        "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: "
        "you tried to allocate 536870912 bytes. Error code 12 (Cannot allocate memory)",
        "std::bad_alloc",
    ],
)
def test_cpu_allocation_failures_are_out_of_memory(message: str) -> None:
    assert is_out_of_memory(RuntimeError(message))


def test_a_shape_onednn_does_not_support_is_not_out_of_memory() -> None:
    unsupported = RuntimeError("could not create a primitive descriptor for a matmul primitive")
    assert not is_out_of_memory(unsupported)
