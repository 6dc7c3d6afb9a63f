"""Packed (varlen) batches give the same numbers as padded ones, or are refused for the model.

Both implementations are covered: transformers modules (packing through its attention
interface, probed at load) and poolrag's native encoders (packed always, padded on request).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from poolrag import Engine
from poolrag.config.network_head import NetworkHead
from poolrag.request import PoolingRequest, ResolvedParams
from poolrag.runner.model_runner import ModelRunner, sliding_window
from poolrag.testing import engine_internals as internals
from poolrag.testing.tiny_models import ENCODER_ARCHS

PARAMS = ResolvedParams(task="embed")


def _requests(engine: Engine, texts: list[str]) -> list[PoolingRequest]:
    return internals.processor(engine).texts(texts, PARAMS, None, None)


TEXTS = [
    "short",
    "A sentence of medium length about batching and padding.",
    "A considerably longer passage that keeps going, with several clauses, commas and words, so that "
    "its length differs a lot from the others in the batch and padding would matter.",
    "Another one.",
]


def _padded_and_packed(runner: ModelRunner, batch: list[PoolingRequest]) -> tuple[torch.Tensor, torch.Tensor]:
    runner.packed = False
    padded = runner.forward(batch).tokens
    assert runner.enable_packing()
    packed = runner.forward(batch).tokens
    assert padded is not None and packed is not None
    assert torch.equal(padded.lengths, packed.lengths)
    assert torch.equal(padded.token_ids, packed.token_ids)
    return padded.states, packed.states


IMPLS = ("transformers", "native")


@pytest.mark.parametrize("impl", IMPLS)
def test_packed_equals_padded_on_minilm(minilm_path: Path, impl: str) -> None:
    engine = Engine(minilm_path, model_impl=impl)
    padded, packed = _padded_and_packed(internals.runner(engine), _requests(engine, TEXTS))
    torch.testing.assert_close(packed, padded, rtol=0, atol=1e-5)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(("arch", "head"), [("bert", None), ("roberta", None), ("bert", "token")])
def test_packed_equals_padded_on_tiny_models(
    tiny_model: Callable[..., Path], arch: str, head: str | None, impl: str
) -> None:
    engine = Engine(tiny_model(arch, head), model_impl=impl)
    internals.runner(engine).first_row_tasks = frozenset()  # compare every row, not CLS only
    padded, packed = _padded_and_packed(internals.runner(engine), _requests(engine, TEXTS))
    torch.testing.assert_close(packed, padded, rtol=0, atol=1e-5)


@pytest.mark.parametrize("arch", ENCODER_ARCHS)
def test_packing_is_exact_or_refused_for_every_encoder(tiny_model: Callable[..., Path], arch: str) -> None:
    """The load-time probe only lets a model run packed when it matches padded."""
    engine = Engine(tiny_model(arch), model_impl="transformers")
    runner = internals.runner(engine)
    batch = _requests(engine, TEXTS)
    padded = runner.forward(batch).tokens
    if runner.enable_packing():
        packed = runner.forward(batch).tokens
        assert padded is not None and packed is not None
        torch.testing.assert_close(packed.states, padded.states, rtol=0, atol=1e-5)
    else:
        assert not runner.packed and not runner.prepare(batch).packed


def test_engine_results_match_with_packing_on(minilm_path: Path) -> None:
    padded_engine = Engine(minilm_path, model_impl="transformers")
    packed_engine = Engine(minilm_path, model_impl="transformers")
    assert internals.runner(packed_engine).enable_packing()
    texts = TEXTS * 3
    torch.testing.assert_close(
        torch.from_numpy(packed_engine.embed_array(texts)),
        torch.from_numpy(padded_engine.embed_array(texts)),
        rtol=0,
        atol=1e-5,
    )


def test_transformers_sequence_classifiers_keep_the_padded_layout(tiny_model: Callable[..., Path]) -> None:
    """Their heads read position 0 of each padded row, which a packed row does not have."""
    runner = internals.runner(Engine(tiny_model("bert", "sequence"), model_impl="transformers"))
    assert not runner.enable_packing()
    assert not runner.packed


def test_native_sequence_classifiers_run_packed(tiny_model: Callable[..., Path]) -> None:
    """The native head reads each sequence's first packed row, so cross-encoders pack too."""
    engine = Engine(tiny_model("bert", "sequence"), model_impl="native")
    reference = Engine(tiny_model("bert", "sequence"), model_impl="transformers")
    assert internals.runner(engine).packed
    pairs = [(TEXTS[0], t) for t in TEXTS]
    got = [o.outputs.probs for o in engine.classify([f"{a} {b}" for a, b in pairs])]
    want = [o.outputs.probs for o in reference.classify([f"{a} {b}" for a, b in pairs])]
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=0, atol=1e-5)


def test_requests_with_their_own_attention_pattern_run_padded(minilm_path: Path) -> None:
    """ColBERT query expansion tokens produce rows without being attended to: varlen cannot say that."""
    engine = Engine(minilm_path, model_impl="transformers")
    runner = internals.runner(engine)
    masked = PoolingRequest((101, 2023, 2003, 103, 103, 102), PARAMS, attention=(1, 1, 1, 0, 0, 1))
    plain = _requests(engine, ["plain text"])[0]
    reference = runner.forward([masked, plain]).tokens
    assert runner.enable_packing()
    assert not runner.prepare([masked, plain]).packed
    assert runner.prepare([plain]).packed
    again = runner.forward([masked, plain]).tokens
    assert reference is not None and again is not None
    assert torch.equal(reference.states, again.states)


def test_the_batcher_is_told_how_padding_costs(tiny_model: Callable[..., Path]) -> None:
    """Padded layout: every padded token costs; native on a CPU: attention runs equal-length runs
    or groups of neighbouring lengths, so nothing pads to the batch's longest and nothing is capped."""
    native = internals.runner(Engine(tiny_model("bert"), model_impl="native"))
    assert native.packed and native.padding_free and native.attention_hidden_size is None
    padded = internals.runner(Engine(tiny_model("bert"), model_impl="transformers"))
    assert not padded.packed and not padded.padding_free and padded.attention_hidden_size is None
    assert padded.enable_packing() and padded.padding_free  # varlen attention: no padding anywhere


def test_a_batch_longer_than_a_sliding_window_runs_padded() -> None:
    """Packed attention sees every earlier token of its sequence; Mistral's and Gemma 2's layers see
    only the last ``sliding_window``. A batch with a longer sequence runs padded, where
    transformers' mask applies the window; shorter ones stay packed (the window changes nothing)."""
    import transformers

    config = transformers.MistralConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, sliding_window=8,
    )  # fmt: skip
    runner = ModelRunner(transformers.MistralModel(config).eval(), NetworkHead.NONE, 0, torch.device("cpu"))
    runner.packed = True  # as on a GPU, where the varlen kernel runs
    short = [PoolingRequest(tuple(range(1, n + 1)), PARAMS) for n in (8, 3)]
    assert runner.prepare(short).packed
    assert not runner.prepare([*short, PoolingRequest(tuple(range(1, 10)), PARAMS)]).packed
    # and such a batch is planned as padded, within the token budget (not 27x over it once padded)
    assert runner.padding_free_for([8, 3]) and not runner.padding_free_for([9, 3])
    assert [sliding_window(c) for c in (config, transformers.Gemma2Config())] == [8, 4096]
    assert [sliding_window(c) for c in (transformers.Qwen2Config(), transformers.LlamaConfig())] == [
        None,
        None,
    ]
