"""``await engine.a<task>(...)`` gives what the sync method gives, and fails the same way."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from poolrag import Engine, PoolingParams
from poolrag.errors import InputTypeError, InvalidInputError, UnsupportedTaskError

TEXTS = ["a short one", "a somewhat longer text about vector search and rerankers", "third"]
PASSAGES = [f"passage {i} about " + "retrieval " * i for i in range(1, 40)]  # enough to tokenise off-loop


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_aembed_and_aembed_array_match_the_sync_api(minilm_engine: Engine) -> None:
    sync = minilm_engine.embed(TEXTS)
    got = run(minilm_engine.aembed(TEXTS))
    assert [o.prompt for o in got] == TEXTS
    assert [o.prompt_token_ids for o in got] == [o.prompt_token_ids for o in sync]
    for a, b in zip(got, sync, strict=True):
        np.testing.assert_allclose(a.outputs.embedding, b.outputs.embedding, rtol=0, atol=1e-6)
    array = run(minilm_engine.aembed_array(PASSAGES))
    np.testing.assert_allclose(array, minilm_engine.embed_array(PASSAGES), rtol=0, atol=1e-6)
    assert run(minilm_engine.aembed_array([])).shape == (0, 384)


def test_ascore_and_aencode_on_an_embedding_model(minilm_engine: Engine) -> None:
    sync = [o.outputs.score for o in minilm_engine.score("what is retrieval?", PASSAGES)]
    got = [o.outputs.score for o in run(minilm_engine.ascore("what is retrieval?", PASSAGES))]
    np.testing.assert_allclose(got, sync, rtol=0, atol=1e-6)
    tokens = run(minilm_engine.aencode(TEXTS, pooling_task="token_embed"))
    for out, ref in zip(tokens, minilm_engine.encode(TEXTS, pooling_task="token_embed"), strict=True):
        np.testing.assert_allclose(out.outputs.data, ref.outputs.data, rtol=0, atol=1e-5)


def test_aclassify_ascore_and_areward_on_cross_encoders(tiny_model: Callable[..., Path]) -> None:
    classifier = Engine(tiny_model("bert", "sequence", num_labels=3))
    for a, b in zip(run(classifier.aclassify(TEXTS)), classifier.classify(TEXTS), strict=True):
        np.testing.assert_allclose(a.outputs.probs, b.outputs.probs, rtol=0, atol=1e-6)
    reranker = Engine(tiny_model("bert", "sequence", num_labels=1))
    got = [o.outputs.score for o in run(reranker.ascore("query", PASSAGES))]
    np.testing.assert_allclose(got, [o.outputs.score for o in reranker.score("query", PASSAGES)], atol=1e-6)
    rewards = run(reranker.areward(TEXTS))
    for a, b in zip(rewards, reranker.reward(TEXTS), strict=True):
        np.testing.assert_allclose(a.outputs.data, b.outputs.data, rtol=0, atol=1e-6)


def test_atoken_classify_matches(tiny_model: Callable[..., Path]) -> None:
    tagger = Engine(tiny_model("bert", "token", num_labels=5))
    for a, b in zip(run(tagger.atoken_classify(TEXTS)), tagger.token_classify(TEXTS), strict=True):
        np.testing.assert_allclose(a.outputs.data, b.outputs.data, rtol=0, atol=1e-6)


def test_async_errors_are_the_sync_errors(minilm_engine: Engine) -> None:
    with pytest.raises(InputTypeError):
        run(minilm_engine.aembed([1, 2]))  # type: ignore[list-item]
    with pytest.raises(InvalidInputError):
        run(minilm_engine.aembed(["fine", "   "]))
    with pytest.raises(InvalidInputError):
        run(minilm_engine.aembed([*PASSAGES, ""]))  # found while tokenising off the event loop
    with pytest.raises(UnsupportedTaskError):
        run(minilm_engine.aclassify(TEXTS))
    with pytest.raises(InvalidInputError):
        run(minilm_engine.aembed(["x " * 1000], PoolingParams(truncate=False)))  # too long, not to be cut
    long = run(minilm_engine.aembed(["x " * 1000], PoolingParams(truncate_prompt_tokens=-1)))
    assert len(long[0].prompt_token_ids) == minilm_engine.max_model_len


def test_the_event_loop_keeps_running_while_the_engine_works(minilm_engine: Engine) -> None:
    """Awaiting an embedding must not block other coroutines (no sync call hidden in the path)."""

    async def main() -> int:
        ticks = 0
        done = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.ensure_future(ticker())
        await minilm_engine.aembed_array(PASSAGES * 4)
        done.set()
        await task
        return ticks

    assert run(main()) > 10


def test_the_async_methods_tokenise_on_the_loop_only_a_call_of_few_short_inputs(
    minilm_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one rule of what leaves the event loop (the server's routes rely on it): many inputs, or
    few inputs carrying much text, are tokenised on a thread."""
    from poolrag.tokenization import input_processor

    threads: list[bool] = []
    tokenise = input_processor.call_tokenizer

    def recorded(*args: object, **kwargs: object) -> object:
        threads.append(threading.current_thread() is threading.main_thread())
        return tokenise(*args, **kwargs)

    monkeypatch.setattr(input_processor, "call_tokenizer", recorded)
    long_text = "retrieval augmented generation " * 4000  # 124,000 characters
    for call, on_loop in (
        (minilm_engine.aembed(["a short one", "third"]), True),
        (minilm_engine.aembed(PASSAGES), False),  # 39 inputs
        (minilm_engine.aembed([long_text]), False),
        (minilm_engine.ascore(long_text, ["a document"]), False),
    ):
        threads.clear()
        run(call)
        assert threads and all(t is on_loop for t in threads), (threads, on_loop)


def test_one_engines_backlog_of_off_loop_work_does_not_hold_up_another_engine(
    minilm_engine: Engine, minilm_path: Path
) -> None:
    """Each engine prepares big async calls on threads of its own: with every thread one model has
    stuck behind its busy tokenizer, another model still answers (on asyncio's shared default
    executor the second model's call waited for the first's backlog)."""
    from poolrag.core.executor import OFF_LOOP_THREADS
    from poolrag.tokenization.tokenizer_lock import tokenizer_lock

    other = Engine(minilm_path)
    busy = tokenizer_lock(minilm_engine.tokenizer)

    async def main() -> bool:
        busy.acquire()  # one big request being tokenised, on this model
        try:
            stuck = [
                asyncio.ensure_future(minilm_engine.aembed_array(PASSAGES))
                for _ in range(OFF_LOOP_THREADS + 2)
            ]
            await asyncio.sleep(0.2)
            answered = await asyncio.wait_for(other.aembed_array(PASSAGES), timeout=30)
            still_busy = busy.locked() and not any(task.done() for task in stuck)
        finally:
            busy.release()
        for got in await asyncio.gather(*stuck):
            np.testing.assert_allclose(got, answered, rtol=0, atol=1e-6)
        return still_busy

    try:
        assert run(main())  # the other model answered while this one's calls were all waiting
    finally:
        other.close()
