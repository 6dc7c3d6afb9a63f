"""Tokenising from several threads at once: each call encodes under its own settings.

A Hugging Face fast tokenizer sets truncation on the Rust tokenizer it wraps and then encodes, so two
unguarded threads could each encode under the other's setting (a request for 8 tokens embedded at
48, an untruncated one cut short, with no error). poolrag holds one lock per tokenizer across both.
"""

from __future__ import annotations

import multiprocessing
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from transformers import AutoTokenizer

from poolrag import Engine, PoolingParams
from poolrag.tokenization.tokenizer_lock import call_tokenizer, tokenizer_lock

TEXT = "the quick brown fox jumps over the lazy dog " * 5


def test_one_lock_per_tokenizer_held_for_the_whole_call() -> None:
    class Probe:
        def __call__(self) -> bool:
            return tokenizer_lock(self).locked()

    first, second = Probe(), Probe()
    assert tokenizer_lock(first) is tokenizer_lock(first)
    assert tokenizer_lock(first) is not tokenizer_lock(second)
    assert call_tokenizer(first) is True
    assert not tokenizer_lock(first).locked()


def test_threads_truncating_differently_each_get_their_own_length(tiny_model: Callable[..., Path]) -> None:
    engine = Engine(tiny_model("bert"))
    full = len(engine.embed([TEXT])[0].prompt_token_ids)
    cut = 8
    assert full > cut
    wrong: list[tuple[int | None, int]] = []
    start = threading.Barrier(4)

    def embed(truncate: int | None, expected: int) -> None:
        params = PoolingParams(truncate_prompt_tokens=truncate)
        start.wait()
        for _ in range(150):
            got = len(engine.embed([TEXT], params)[0].prompt_token_ids)
            if got != expected:
                wrong.append((truncate, got))
            got = len(engine.tokenize(TEXT))  # an untruncated call beside the truncating ones
            if got != full:
                wrong.append((None, got))

    threads = [threading.Thread(target=embed, args=args) for args in [(None, full), (cut, cut)] * 2]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


_INHERITED: Any = None  # the tokenizer a forked worker finds, as a module global of the parent


def _cut_to_eight_in_child(text: str) -> list[int]:
    return call_tokenizer(_INHERITED, text, truncation=True, max_length=8)["input_ids"]


@pytest.mark.skipif(sys.platform != "linux", reason="the fork start method is Linux's default")
def test_a_worker_forked_while_a_thread_tokenised_tokenises(minilm_path: Path) -> None:
    """A thread of the parent encoding at the fork (an app embedding on a thread while a ``fork``
    Pool starts) holds the Rust tokenizer's read lock: the child has no such thread, and its first
    call, which sets truncation, waited forever for it. The fork waits for the call instead."""
    global _INHERITED
    _INHERITED = AutoTokenizer.from_pretrained(minilm_path)
    long_texts = [TEXT * 40] * 100  # about 200,000 tokens: the encoding outlasts the fork below
    encoding = threading.Thread(target=call_tokenizer, args=(_INHERITED, long_texts))
    encoding.start()
    try:
        while not tokenizer_lock(_INHERITED).locked() and encoding.is_alive():
            time.sleep(0.001)
        time.sleep(0.05)  # past the Python side of the call, into the Rust encoding
        with multiprocessing.get_context("fork").Pool(1) as pool:
            got = pool.apply_async(_cut_to_eight_in_child, (TEXT,)).get(timeout=60)
        assert got == _cut_to_eight_in_child(TEXT) and len(got) == 8
    finally:
        encoding.join()
        _INHERITED = None
