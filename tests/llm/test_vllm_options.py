"""``LLM(...)`` takes vLLM's engine keywords: each mapped to poolrag's, or accepted with one warning.

Issue 30, item 3: "``LLM()`` accepts and ignores the same knobs" (``--gpu-memory-utilization``,
``--enforce-eager``, ``--max-num-seqs``, ...) in silence.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from poolrag import LLM
from poolrag.errors import InvalidInputError
from poolrag.testing import engine_internals as internals


def test_max_num_seqs_sets_the_batchers_sequences_per_pass(minilm_path: Path) -> None:
    llm = LLM(str(minilm_path), max_num_seqs=3, enforce_eager=True)
    batcher = internals.batcher(llm.engine)
    assert batcher.max_batch_size == 3
    assert all(len(batch) <= 3 for batch in batcher.plan([5, 6, 7, 8, 9, 10, 11]))
    assert llm.engine.compile_report is None  # enforce_eager: nothing compiled
    assert len(llm.embed(["a", "b", "c", "d", "e"])) == 5


def test_knobs_without_effect_get_one_warning_naming_them(
    minilm_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="poolrag.llm"):
        LLM(str(minilm_path), gpu_memory_utilization=0.5, swap_space=4, enable_prefix_caching=True, seed=0)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert all(
        name in warnings[0] for name in ("gpu_memory_utilization", "swap_space", "enable_prefix_caching")
    )
    assert "no effect" in warnings[0]


def test_mapped_knobs_warn_nothing_and_contradictions_are_refused(
    minilm_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="poolrag.llm"):
        LLM(str(minilm_path), max_num_seqs=8, max_num_batched_tokens=1024, tensor_parallel_size=1)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    with pytest.raises(InvalidInputError, match="enforce_eager"):
        LLM(str(minilm_path), enforce_eager=True, compile="background")
    with pytest.raises(InvalidInputError, match="parallelism is not supported"):
        LLM(str(minilm_path), pipeline_parallel_size=2)


def test_enforce_eager_turns_compile_off_even_where_a_tune_verdict_chose_compiled(minilm_path: Path) -> None:
    """Left at its default (None), compile follows the tune verdict, which may name a compiled path;
    vLLM's enforce_eager promises no compile at all, so it is poolrag's compile="off"."""
    assert LLM(str(minilm_path), enforce_eager=True).engine.engine_args.compile == "off"
    assert LLM(str(minilm_path)).engine.engine_args.compile is None


def test_vllm_0_32_constructor_keywords(minilm_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Keywords vLLM 0.32 users pass: taken with the one warning where they change nothing offline,
    honoured where they are what poolrag does, refused in one line where they ask for what it cannot."""
    with caplog.at_level(logging.WARNING, logger="poolrag.llm"):
        llm = LLM(
            str(minilm_path),
            served_model_name="embedder",
            kv_cache_memory_bytes=2**30,
            max_logprobs=0,
            data_parallel_size=1,
            tokenizer_mode="auto",
            skip_tokenizer_init=False,
        )
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert all(name in warning for name in ("kv_cache_memory_bytes", "max_logprobs"))
    assert "served_model_name" not in warning  # not a cache / scheduler / memory knob: reported below
    assert llm.embed("a cat")[0].outputs.hidden_size == 384
    # vLLM's model_config reports the served name a script gave (poolrag reported the model path)
    assert llm.model_config.served_model_name == "embedder"
    assert llm.llm_engine.vllm_config.model_config.served_model_name == "embedder"
    assert dataclasses.replace(llm.model_config, served_name=["a", "b"]).served_model_name == "a"
    for kwargs, message in (
        ({"data_parallel_size": 2}, "replicas run on Ray"),
        ({"tokenizer_mode": "mistral"}, "tokenizer_mode must be 'auto' or 'hf'"),
        ({"skip_tokenizer_init": True}, "poolrag tokenises every text"),
    ):
        with pytest.raises(InvalidInputError, match=message):
            LLM(str(minilm_path), **kwargs)
