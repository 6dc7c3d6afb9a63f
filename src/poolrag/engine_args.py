"""``EngineArgs``: every option an :class:`~poolrag.Engine` takes, as one frozen, picklable value.

One value checked when it is made gives every door (the CLI, the Ray recipes, the adapters,
``LLM``) the same options, the same flags and the same one-line errors naming the field: options
passed as a loose mapping would surface a typo deep inside a Ray actor, and flags written per
subcommand drift apart. ``Engine(model, **kwargs)`` stays as it is; ``Engine.from_engine_args``
builds from this value.

This module imports nothing heavy (no torch), so ``poolrag --help`` stays fast: the choices below
are spelled out and a test keeps them equal to the loaders' own lists.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, get_args

from poolrag.config.option_choices import (
    MODEL_IMPLS,
    QUANTIZATION_SCHEMES,
    TUNE_MODES,
    CompileMode,
    Convert,
    CpuFastMode,
    DTypeName,
    ModelImpl,
    Quantization,
    TuneMode,
)
from poolrag.config.pooler_config import PoolerConfig
from poolrag.counts import check_optional_count
from poolrag.errors import InputTypeError, InvalidInputError

if TYPE_CHECKING:
    import torch

    from poolrag.tokenization.score_template import ScoreTemplate

DTYPES: tuple[DTypeName, ...] = get_args(DTypeName)
CONVERTS: tuple[Convert, ...] = get_args(Convert)
CPU_FAST_MODES: tuple[CpuFastMode, ...] = get_args(CpuFastMode)
COMPILE_MODES: tuple[CompileMode, ...] = get_args(CompileMode)
#: vLLM's ``--convert`` values on the command line; ``auto`` / ``none`` keep the checkpoint as it is.
CLI_CONVERTS = ("auto", "none", *CONVERTS)
#: How a model runs rather than which model it is: what a second model of one command (a reranker,
#: a sparse model) takes from the main model's flags; task, pooling, overrides and revision are not.
RUNTIME_FIELDS = (
    "dtype",
    "device",
    "trust_remote_code",
    "max_batch_tokens",
    "max_batch_size",
    "device_map",
    "quantization",
    "cpu_fast_mode",
    "cpu_fast_mode_min_cosine",
    "model_impl",
    "compile",
    "tune",
    "download_dir",
    "hf_token",
    "truncate",
)


@dataclass(frozen=True)
class EngineArgs:
    """What :class:`~poolrag.Engine` is built from; the fields are ``Engine``'s keyword arguments
    (see its docstring for what each does). Checked when made: a bad value is an
    :class:`~poolrag.InvalidInputError` naming the field."""

    model: str | os.PathLike[str]  # a path becomes its string
    task: str | None = None
    dtype: DTypeName | torch.dtype = "auto"
    device: str | torch.device | None = None
    max_model_len: int | None = None
    pooler_config: PoolerConfig | dict[str, Any] | str | None = None  # a dict or JSON text: checked
    hf_overrides: dict[str, Any] | None = None
    trust_remote_code: bool = False
    max_batch_tokens: int | None = None
    max_batch_size: int | None = None
    revision: str | None = None
    tokenizer: str | None = None
    tokenizer_revision: str | None = None
    download_dir: str | None = None
    hf_token: str | bool | None = field(default=None, repr=False)  # a secret: never in a log line
    convert: Convert | None = None
    score_template: str | ScoreTemplate | None = None
    device_map: str | dict[str, Any] | None = None
    quantization: Quantization | None = None
    cpu_fast_mode: CpuFastMode | None = None
    cpu_fast_mode_min_cosine: float | None = None
    model_impl: ModelImpl = "auto"
    compile: CompileMode | None = None
    tune: TuneMode | None = None
    truncate: bool = True

    def __post_init__(self) -> None:
        model = os.fspath(self.model) if isinstance(self.model, os.PathLike) else self.model
        if not isinstance(model, str) or not model:
            raise InvalidInputError(f"model must be a non-empty path or hub id, not {self.model!r}")
        object.__setattr__(self, "model", model)
        for name in ("revision", "tokenizer", "download_dir"):  # a folder may come as a Path
            value = getattr(self, name)
            if isinstance(value, os.PathLike):
                object.__setattr__(self, name, os.fspath(value))
        for name in ("task", "revision", "tokenizer", "tokenizer_revision", "download_dir"):
            _check_type(name, getattr(self, name), str)
        _check_type("hf_token", self.hf_token, (str, bool))
        _check_dtype(self.dtype)
        _check_device(self.device)
        for name in ("max_model_len", "max_batch_tokens", "max_batch_size"):
            object.__setattr__(self, name, check_optional_count(getattr(self, name), name))
        if self.pooler_config is not None:  # a dict or JSON text becomes the checked config
            object.__setattr__(self, "pooler_config", PoolerConfig.from_value(self.pooler_config))
        _check_type("hf_overrides", self.hf_overrides, Mapping)
        if self.hf_overrides is not None:  # a copy: the caller's dict cannot change a frozen value
            object.__setattr__(self, "hf_overrides", dict(self.hf_overrides))
        if self.trust_remote_code is None:  # "not given", as a caller forwarding an optional passes it
            object.__setattr__(self, "trust_remote_code", False)
        for name in ("truncate", "trust_remote_code"):
            if not isinstance(value := getattr(self, name), bool):
                raise InvalidInputError(f"{name} must be True or False, not {value!r}")
        _check_choice("convert", self.convert, CONVERTS)
        _check_choice("quantization", self.quantization, QUANTIZATION_SCHEMES)
        _check_choice("cpu_fast_mode", self.cpu_fast_mode, CPU_FAST_MODES)
        _check_choice("model_impl", self.model_impl, MODEL_IMPLS, optional=False)
        _check_choice("compile", self.compile, COMPILE_MODES)
        _check_choice("tune", self.tune, TUNE_MODES)
        cosine = self.cpu_fast_mode_min_cosine
        if cosine is not None and (
            isinstance(cosine, bool) or not isinstance(cosine, (int, float)) or not 0 <= cosine <= 1
        ):
            raise InvalidInputError(f"cpu_fast_mode_min_cosine must be a number in [0, 1], not {cosine!r}")
        if self.device_map is not None and not isinstance(self.device_map, (str, dict)):
            raise InvalidInputError(
                f"device_map must be a string or a dict, not {type(self.device_map).__name__}"
            )

    @classmethod
    def from_options(cls, model: str | os.PathLike[str], options: Mapping[str, Any] | None) -> EngineArgs:
        """``Engine(model, **options)``'s arguments as a value; an unknown key is one
        :class:`~poolrag.InputTypeError` naming it and the known ones."""
        given = dict(options or {})
        unknown = sorted(set(given) - set(ENGINE_OPTIONS))
        if unknown:
            raise InputTypeError(f"unknown options {unknown}; an engine takes {sorted(ENGINE_OPTIONS)}")
        return cls(os.fspath(model), **given)

    def engine_kwargs(self) -> dict[str, Any]:
        """Every option but the model, as ``Engine``'s keyword arguments (for callers that build
        an engine their own way; ``Engine.from_engine_args`` takes the value itself)."""
        return {name: getattr(self, name) for name in ENGINE_OPTIONS}

    def sibling(self, model: str | os.PathLike[str]) -> EngineArgs:
        """Another model run the way this one runs (:data:`RUNTIME_FIELDS`): a command's reranker or
        sparse model takes its device, dtype and trust flags, not its task, pooling or overrides."""
        return EngineArgs(os.fspath(model), **{name: getattr(self, name) for name in RUNTIME_FIELDS})

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        """vLLM's ``EngineArgs.add_cli_args``: the engine flags with ``--model``, ``--runner`` and
        ``--enforce-eager``, returning the parser, so a vLLM example's ``LLM(**vars(args))`` runs on
        :class:`~poolrag.LLM` (which takes every name these flags set)."""
        EngineArgs.add_engine_flags(parser)
        parser.add_argument("--model", help="hub id or local folder")
        parser.add_argument("--runner", choices=("auto", "pooling"), default="auto", help="vLLM's runner")
        parser.add_argument("--enforce-eager", "--enforce_eager", action="store_true", help="never compile")
        parser.set_defaults(auto_truncate=False)  # LLM's default, vLLM's: an over-long prompt is refused
        return parser

    @staticmethod
    def add_engine_flags(
        parser: argparse.ArgumentParser, *, autotune: bool = True
    ) -> argparse._ArgumentGroup:
        """The engine flags, spelled the same (and meaning the same) in every subcommand; each
        multi-word flag also in vLLM's ``--a_b`` spelling. The model itself is each command's own
        argument (``serve MODEL``, ``ingest --model``). ``autotune=False`` leaves ``--autotune`` out
        for a command that makes that choice itself (``poolrag tune`` always measures). Returns the
        group, for a command's own engine flags (vLLM's aliases in ``serve``)."""
        group = parser.add_argument_group("engine")
        add_flag(
            group,
            "--task",
            type=_task,
            help="primary pooling task (default, or vLLM's auto: the model's own)",
        )
        add_flag(group, "--dtype", default="auto", choices=DTYPES, help="weights' dtype (default: auto)")
        add_flag(group, "--device", help="cuda, cpu, ... (default: auto)")
        add_flag(
            group,
            "--max-model-len",
            type=_model_length,
            help="token limit per input; vLLM's forms too: 32k (32,000), 32K (32,768), auto or -1 "
            "(the model's)",
        )
        add_flag(
            group,
            "--max-batch-tokens",
            "--max-num-batched-tokens",
            type=token_count,
            help="tokens per forward pass (default: 16384 on CUDA, 4096 on CPU)",
        )
        add_flag(
            group,
            "--max-num-seqs",
            "--max-batch-size",
            "--max-batch-requests",
            type=positive_int,
            help="most sequences per forward pass (default 512)",
        )
        add_flag(group, "--tokenizer", help="tokenizer folder or hub id (default: the model's)")
        add_flag(group, "--revision", help="hub revision of the model")
        add_flag(group, "--tokenizer-revision", help="hub revision of --tokenizer")
        add_flag(
            group,
            "--download-dir",
            "--huggingface-hub-cache",
            help="hub cache folder (default: huggingface_hub's, $HF_HOME)",
        )
        add_flag(
            group,
            "--hf-token",
            nargs="?",
            const=True,
            help="hub access token; bare: the one `hf auth login` saved (default: $HF_TOKEN)",
        )
        add_flag(
            group, "--trust-remote-code", action="store_true", help="allow model folders with their own code"
        )
        add_flag(
            group,
            "--pooler-config",
            "--override-pooler-config",  # vLLM's name for it before 0.12
            type=json_object,
            metavar="JSON",
            help="pooling overrides (vLLM's keys)",
        )
        add_flag(
            group,
            "--pooling",
            choices=tuple(TEI_POOLING),
            help="text-embeddings-router's flag: the pooler-config's pooling_type (last-token: LAST)",
        )
        add_flag(
            group, "--hf-overrides", type=json_object, metavar="JSON", help="transformers config overrides"
        )
        add_flag(
            group,
            "--convert",
            choices=CLI_CONVERTS,
            default="auto",
            help="vLLM's model conversion: pool the backbone (embed), score from lm_head rows (classify), "
            "or a process reward model (reward)",
        )
        add_flag(
            group,
            "--score-template",
            metavar="NAME|FILE",
            help="prompt for (query, document) pairs of LLM rerankers: a shipped name "
            "(qwen3_reranker, bge_reranker_v2_gemma, mxbai_rerank_v2) or a .jinja file",
        )
        add_flag(
            group,
            "--device-map",
            type=_device_map,
            metavar="auto|JSON",
            help="accelerate placement of a model larger than one device",
        )
        add_flag(
            group,
            "--quantization",
            type=_weight_scheme,
            metavar="|".join(QUANTIZATION_SCHEMES),
            help="the model's weights, quantized (torchao); fp8 needs CUDA",
        )
        add_flag(
            group,
            "--cpu-fast-mode",
            choices=CPU_FAST_MODES,
            help="faster, inexact CPU inference; kept only if its measured cosine to fp32 clears the bar "
            "(auto: the faster of bf16 and int8 that does, timed on this machine)",
        )
        add_flag(
            group,
            "--cpu-fast-mode-min-cosine",
            type=unit_interval,
            metavar="COSINE",
            help="the bar of --cpu-fast-mode (default 0.999)",
        )
        add_flag(
            group,
            "--model-impl",
            choices=MODEL_IMPLS,
            default="auto",
            help="poolrag's own encoder implementation where exact (auto), required (native), or never",
        )
        add_flag(
            group,
            "--compile",
            choices=COMPILE_MODES,
            help="background: run eagerly at once, compile the forward (inductor, cached on disk for the "
            "next start) and switch to it once it matches eager; off: never compile (a tune then times "
            "the eager paths only)",
        )
        add_flag(
            group,
            "--auto-truncate",
            dest="auto_truncate",
            action=argparse.BooleanOptionalAction,
            default=True,
            help="cut an input over the model's length to its first tokens, as sentence-transformers "
            "and TEI do (default); --no-auto-truncate (TEI's --auto-truncate false) refuses it instead, "
            "unless a request asks to truncate",
        )
        if autotune:
            add_flag(  # not --tune: that is ``poolrag eval``'s choice of the hybrid fusion
                group,
                "--autotune",
                choices=TUNE_MODES,
                help="time the exact paths at the model's first load on this machine (auto), again now "
                "with the compiled paths too, as 'poolrag tune' does (full), only use a verdict measured "
                "before (cached), or never (off) (default: $POOLRAG_TUNE, else auto; search: cached)",
            )
        return group

    @classmethod
    def from_cli_args(cls, namespace: argparse.Namespace, model: str | None = None) -> EngineArgs:
        """The value the flags of :meth:`add_engine_flags` describe, for ``model`` (default: the
        namespace's ``model``)."""
        chosen = model if model is not None else getattr(namespace, "model", None)
        if not chosen:
            raise InvalidInputError("no model given")
        renamed = {  # the flags whose names or values differ from the fields'
            "max_batch_size": namespace.max_num_seqs,
            "pooler_config": with_tei_pooling(namespace.pooler_config, namespace.pooling),
            "convert": None if namespace.convert in ("auto", "none") else namespace.convert,
            "tune": getattr(namespace, "autotune", None),
            "truncate": namespace.auto_truncate,
        }
        same = {name: getattr(namespace, name) for name in ENGINE_OPTIONS if name not in renamed}
        return cls(chosen, **same, **renamed)

    def replace(self, **changes: Any) -> EngineArgs:
        """A copy with ``changes``, checked again."""
        return dataclasses.replace(self, **changes)

    def for_other_processes(self) -> EngineArgs:
        """A copy whose model and tokenizer folders given relative to this process's working
        directory are absolute, so a process started elsewhere (a Ray actor or replica, whose
        working directory is its raylet's) loads the same folders; hub ids are left as they are."""
        local = {
            name: os.path.abspath(value)
            for name in ("model", "tokenizer")
            if isinstance(value := getattr(self, name), str) and os.path.exists(value)
        }
        return self.replace(**local) if local else self


#: ``Engine``'s keyword arguments, in its order (a test keeps them equal to its signature). Each
#: is read from the flag of its name by ``from_cli_args``: a new option needs its flag in ``add_cli_args``.
ENGINE_OPTIONS = tuple(f.name for f in fields(EngineArgs) if f.name != "model")


def add_flag(group: Any, flag: str, *aliases: str, **kwargs: Any) -> None:
    """``--a-b`` plus vLLM's other spelling ``--a_b`` (vLLM takes both) of every long name."""
    names = [flag, *aliases]
    names += [
        n.replace("-", "_").replace("__", "--", 1) for n in names if n.startswith("--") and "-" in n[2:]
    ]
    group.add_argument(*names, **kwargs)


#: text-embeddings-router's ``--pooling`` values, as the pooler-config's ``pooling_type``
TEI_POOLING = {"cls": "CLS", "mean": "MEAN", "splade": "SPLADE", "last-token": "LAST"}


def with_tei_pooling(pooler_config: Any, pooling: str | None) -> Any:
    """``--pooler-config`` with TEI's ``--pooling`` as its ``pooling_type``; both naming one is refused."""
    if pooling is None:
        return pooler_config
    config = PoolerConfig.from_value(pooler_config)
    wanted = TEI_POOLING[pooling]
    if config.pooling_type is not None and config.pooling_type != wanted:
        raise InvalidInputError(
            f"--pooling {pooling} and --pooler-config's pooling_type {config.pooling_type} disagree"
        )
    return dataclasses.replace(config, pooling_type=wanted)


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from exc
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


#: vLLM's suffixes of a human-readable count (``human_readable_int``): k, m, g, t decimal; K, M, G, T binary.
_DECIMAL_SUFFIXES = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY_SUFFIXES = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def token_count(text: str) -> int:
    """An argparse type: a token count of at least 1, also in vLLM's human-readable form, which
    ``vllm serve`` lines use (``16k`` is 16,000, ``0.5k`` 500, ``16K`` 16,384; no decimals with K)."""
    value = text.strip()
    number, suffix = value[:-1], value[-1:]
    try:
        if suffix in _BINARY_SUFFIXES:
            count = int(number) * _BINARY_SUFFIXES[suffix]
        elif suffix in _DECIMAL_SUFFIXES:
            scaled = float(number) * _DECIMAL_SUFFIXES[suffix]
            count = int(scaled) if scaled.is_integer() else int(text)  # 0.5005k: not a whole count
        else:
            count = int(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a token count: {text!r} (e.g. 512, 8k, 8K)") from exc
    return positive_int(str(count))  # the one rule of at least 1


def _model_length(text: str) -> int | None:
    """``--max-model-len``: a token count, or vLLM's ``auto`` / ``-1``: the model's own length."""
    return None if text.strip().lower() in ("auto", "-1") else token_count(text)


#: vLLM's ``--task`` values that name no pooling task: its generation tasks.
_GENERATION_TASKS = ("generate", "transcription", "draft")


def _task(text: str) -> str | None:
    """``--task``: a pooling task; vLLM's ``auto`` (its default) is the model's own, and its
    ``embedding`` (vLLM 0.6) is ``embed``."""
    if text in _GENERATION_TASKS:
        raise argparse.ArgumentTypeError(f"poolrag serves pooling models only, not --task {text}")
    return {"auto": None, "embedding": "embed"}.get(text, text)


def positive_float(text: str) -> float:
    """An argparse type: a finite number above 0 (sizes, timeouts)."""
    return _finite(text, lambda value: value > 0, "above 0")


def non_negative_float(text: str) -> float:
    """An argparse type: a finite number of at least 0 (delays)."""
    return _finite(text, lambda value: value >= 0, "at least 0")


def unit_interval(text: str) -> float:
    """An argparse type: a number from 0 to 1 (a share, such as the reranker's)."""
    return _finite(text, lambda value: 0 <= value <= 1, "from 0 to 1")


def _finite(text: str, accept: Callable[[float], bool], bound: str) -> float:
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from exc
    if not math.isfinite(value) or not accept(value):
        raise argparse.ArgumentTypeError(f"must be a number {bound}, got {text}")
    return value


def json_object(text: str) -> dict[str, Any]:
    """An argparse type: a JSON object."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def _device_map(text: str) -> str | dict[str, Any]:
    return json_object(text) if text.lstrip().startswith("{") else text


def _weight_scheme(text: str) -> str:
    """``--quantization`` is the weights' scheme in every command; ``binary`` only ever named an
    index's compression, which ``ingest`` / ``eval`` now spell ``--index-quantization``."""
    if text == "binary":
        raise argparse.ArgumentTypeError(
            "'binary' is not a weight quantization (int8, fp8); a binary index is --index-quantization binary"
        )
    if text not in QUANTIZATION_SCHEMES:
        raise argparse.ArgumentTypeError(f"must be one of {', '.join(QUANTIZATION_SCHEMES)}, not {text!r}")
    return text


def _check_type(name: str, value: object, kind: type | tuple[type, ...]) -> None:
    if value is not None and not isinstance(value, kind):
        kinds = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise InvalidInputError(f"{name} must be a {kinds}, not {type(value).__name__}")


def _check_choice(name: str, value: object, choices: tuple[str, ...], *, optional: bool = True) -> None:
    if (value is None and optional) or value in choices:
        return
    raise InvalidInputError(f"{name} must be one of {', '.join(choices)}, not {value!r}")


def _check_dtype(dtype: object) -> None:
    if isinstance(dtype, str):
        if dtype.lower() not in DTYPES:
            raise InvalidInputError(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    elif not _is_torch(dtype, "dtype"):
        raise InvalidInputError(f"dtype must be a name or a torch.dtype, not {type(dtype).__name__}")


def _check_device(device: object) -> None:
    if device is not None and not isinstance(device, str) and not _is_torch(device, "device"):
        raise InvalidInputError(f"device must be a name or a torch.device, not {type(device).__name__}")


def _is_torch(value: object, kind: str) -> bool:
    """Whether ``value`` is a ``torch.<kind>``, asked without importing torch."""
    return type(value).__module__ == "torch" and type(value).__name__ == kind
