"""``EngineArgs``: every option ``Engine`` takes as one frozen, picklable value, checked when made,
a bad field being one line that names it (issue 28, item 2)."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from poolrag import Engine, EngineArgs, InputTooLongError, InputTypeError, InvalidInputError, PoolerConfig
from poolrag.engine_args import (
    CONVERTS,
    CPU_FAST_MODES,
    DTYPES,
    ENGINE_OPTIONS,
    RUNTIME_FIELDS,
)


def test_the_fields_are_engines_keyword_arguments_with_its_defaults() -> None:
    signature = inspect.signature(Engine.__init__).parameters
    engine_options = {name: p.default for name, p in signature.items() if name not in ("self", "model")}
    fields = {f.name: f.default for f in dataclasses.fields(EngineArgs) if f.name != "model"}
    assert fields == engine_options
    assert tuple(engine_options) == ENGINE_OPTIONS


def test_the_choices_are_the_loaders_own() -> None:
    """Spelled out so that the CLI's --help imports no torch; these are the lists they copy (model_impl,
    tune and quantization are written once, in poolrag.config.option_choices, for both)."""
    from poolrag.llm import CONVERTS as llm_converts
    from poolrag.loading.cpu_fast_mode import FAST_MODES
    from poolrag.loading.dtype import _DTYPES

    assert set(DTYPES) == {"auto", *_DTYPES}
    assert ("auto", *FAST_MODES) == CPU_FAST_MODES
    assert set(CONVERTS) == {v for v in llm_converts.values() if v is not None}


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"model": ""}, "model"),
        ({"dtype": "float64"}, "dtype"),
        ({"dtype": 32}, "dtype"),
        ({"device": 0}, "device"),
        ({"max_model_len": 0}, "max_model_len"),
        ({"max_batch_tokens": True}, "max_batch_tokens"),
        ({"max_batch_size": "8"}, "max_batch_size"),
        ({"pooler_config": {"pooling": "CLS"}}, "pooler_config"),
        ({"pooler_config": "{CLS}"}, "pooler_config"),
        ({"hf_overrides": "is_matryoshka"}, "hf_overrides"),
        ({"trust_remote_code": "yes"}, "trust_remote_code"),
        ({"convert": "generate"}, "convert"),
        ({"quantization": "binary"}, "quantization"),
        ({"cpu_fast_mode": "fp16"}, "cpu_fast_mode"),
        ({"cpu_fast_mode_min_cosine": 1.5}, "cpu_fast_mode_min_cosine"),
        ({"model_impl": None}, "model_impl"),
        ({"compile": "eager"}, "compile"),
        ({"tune": "fast"}, "tune"),
        ({"device_map": 3}, "device_map"),
        ({"task": 1}, "task"),
    ],
)
def test_a_bad_field_is_one_line_naming_it(changes: dict, field: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        EngineArgs(**{"model": "some/model", **changes})
    message = str(caught.value)
    assert field in message and "\n" not in message


@pytest.mark.parametrize(
    ("changes", "field"),
    [({"max_batch_tokens": 0}, "max_batch_tokens"), ({"trust_remote_code": "yes"}, "trust_remote_code")],
)
def test_engine_checks_its_keywords_by_the_same_rule_before_loading(changes: dict, field: str) -> None:
    """``Engine(model, **kwargs)`` is checked by EngineArgs itself: a zero budget is refused, not
    replaced by the default, and nothing is fetched for a model whose options are wrong."""
    model = "no-such-org/not-a-model"
    with pytest.raises(InvalidInputError, match=field):
        Engine(model, **changes)
    with pytest.raises(InvalidInputError, match=field):
        EngineArgs(model, **changes)


def test_an_unknown_option_is_one_line_naming_it() -> None:
    with pytest.raises(InputTypeError, match=r"unknown options \['max_seq_len'\]; an engine takes") as caught:
        EngineArgs.from_options("some/model", {"dtype": "float32", "max_seq_len": 64})
    assert "\n" not in str(caught.value)
    assert EngineArgs.from_options(Path("some/model"), {"dtype": "bf16"}) == EngineArgs(
        "some/model", dtype="bf16"
    )


def test_frozen_picklable_and_independent_of_the_callers_dicts() -> None:
    overrides = {"is_matryoshka": True}
    args = EngineArgs(
        "some/model", hf_overrides=overrides, pooler_config='{"pooling_type": "cls"}', max_model_len=64
    )
    overrides["is_matryoshka"] = False
    assert args.hf_overrides == {"is_matryoshka": True}
    assert args.pooler_config == PoolerConfig(pooling_type="CLS")  # JSON text became the checked config
    with pytest.raises(dataclasses.FrozenInstanceError):
        args.dtype = "float16"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(args)) == args
    with pytest.raises(InvalidInputError, match="max_model_len"):
        args.replace(max_model_len=-1)  # a changed copy is checked again


def test_a_sibling_runs_the_same_way_but_is_its_own_model() -> None:
    args = EngineArgs(
        "embedder",
        dtype="bfloat16",
        trust_remote_code=True,
        max_batch_size=8,
        compile="off",
        hf_overrides={"is_matryoshka": True},
        pooler_config={"normalize": False},
        revision="v2",
        task="embed",
    )
    sibling = args.sibling("reranker")
    assert sibling.model == "reranker"
    assert {name: getattr(sibling, name) for name in RUNTIME_FIELDS} == {
        name: getattr(args, name) for name in RUNTIME_FIELDS
    }
    assert (sibling.hf_overrides, sibling.pooler_config, sibling.revision, sibling.task) == (None,) * 4


def test_the_engine_built_from_args_is_the_one_its_keywords_build(tiny_model: Callable[..., Path]) -> None:
    folder = tiny_model("bert")
    default = Engine(folder)
    pooling = "CLS" if default.pooler_config.pooling_type == "MEAN" else "MEAN"  # not the folder's own
    options = {"max_model_len": 64, "max_batch_tokens": 256, "pooler_config": {"pooling_type": pooling}}
    from_args = Engine.from_engine_args(EngineArgs.from_options(folder, options))
    from_keywords = Engine(folder, **options)
    assert from_args.model_identity == from_keywords.model_identity and from_args.max_model_len == 64
    assert from_args.pooler_config.pooling_type == pooling
    texts = ["one short text", "a second, somewhat longer text about pandas " * 4]
    np.testing.assert_allclose(from_args.embed_array(texts), from_keywords.embed_array(texts), atol=1e-6)
    assert not np.allclose(from_args.embed_array(texts), default.embed_array(texts), atol=1e-3)


def test_an_engine_keeps_the_one_value_it_was_built_from(tiny_model: Callable[..., Path]) -> None:
    """``from_engine_args`` takes the value as it is (no trip through keywords); the keywords make
    the equal value, and the engine answers from it (here: ``max_model_len`` and ``truncate``)."""
    folder = tiny_model("bert")
    args = EngineArgs(str(folder), max_model_len=64, truncate=False)
    from_args = Engine.from_engine_args(args)
    from_keywords = Engine(folder, max_model_len=64, truncate=False)
    assert from_args.engine_args is args and from_keywords.engine_args == args
    for engine in (from_args, from_keywords):
        assert engine.max_model_len == 64
        with pytest.raises(InputTooLongError):
            engine.embed_array(["word " * 80])


def test_values_callers_pass_for_the_same_meaning_are_taken_as_it() -> None:
    """A folder as a Path, an integer from numpy, "not given" as None, a read-only mapping: each is
    taken as the plain value it means, so forwarding code keeps working."""
    import types

    args = EngineArgs(
        "some/model",
        tokenizer=Path("/models/tok"),
        revision=None,
        trust_remote_code=None,
        max_model_len=np.int64(64),
        hf_overrides=types.MappingProxyType({"is_matryoshka": True}),
    )
    assert args.tokenizer == "/models/tok" and args.trust_remote_code is False
    assert args.max_model_len == 64 and type(args.max_model_len) is int
    assert args.hf_overrides == {"is_matryoshka": True} and type(args.hf_overrides) is dict
