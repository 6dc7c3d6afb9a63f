"""Pooler configuration: the defaults a model folder implies, overridable by the caller."""

from __future__ import annotations

import json
import math
from dataclasses import InitVar, dataclass, fields, replace
from typing import Any, Literal, get_args

from poolrag.counts import check_optional_count
from poolrag.errors import InvalidInputError
from poolrag.model_facts import PoolingTask

PoolingType = Literal["CLS", "MEAN", "LAST", "MAX", "WEIGHTEDMEAN", "MEAN_SQRT_LEN", "ALL", "STEP", "SPLADE"]
POOLING_TYPES: tuple[str, ...] = get_args(PoolingType)
#: the pooling types sentence-transformers has, with its two names for each: its ``pooling_mode`` (6.x)
#: and its ``pooling_mode_*`` flag (2.x-5.x); the types an embedder accepts are the methods of
#: ``pooling/methods.py`` (``POOLING_METHODS``), which may hold one sentence-transformers lacks
SENTENCE_POOLING: dict[PoolingType, tuple[str, str]] = {
    "CLS": ("cls", "pooling_mode_cls_token"),
    "MEAN": ("mean", "pooling_mode_mean_tokens"),
    "LAST": ("lasttoken", "pooling_mode_lasttoken"),
    "MAX": ("max", "pooling_mode_max_tokens"),
    "WEIGHTEDMEAN": ("weightedmean", "pooling_mode_weightedmean_tokens"),
    "MEAN_SQRT_LEN": ("mean_sqrt_len_tokens", "pooling_mode_mean_sqrt_len_tokens"),
}
#: vLLM 0.32's keys beside ``pooling_type``: its sequence and token pooling methods
_SPLIT_POOLING_KEYS = ("seq_pooling_type", "tok_pooling_type")
#: vLLM keys that choose a CUDA kernel of its own and change no result
_KERNEL_KEYS = ("enable_flash_late_interaction",)
Activation = Literal["softmax", "sigmoid", "identity"]
#: the tasks ``task`` may name: poolrag's own (vLLM's, with ``reward`` and ``sparse_embed``); ``score``
#: is not one, since a score is computed by one of them (vLLM removed it the same way)
POOLER_TASKS: tuple[str, ...] = tuple(t for t in get_args(PoolingTask) if t != "score")


@dataclass(frozen=True, slots=True)
class PoolerConfig:
    """How hidden states become outputs. ``None`` fields fall back to the model folder's defaults.

    Mirrors vLLM's ``pooler_config`` keys so configurations carry over. ``enable_chunked_processing``
    embeds inputs longer than the model's window in window-sized chunks (their pooled vectors
    averaged, weighted by token count); ``max_embed_len`` caps the length such inputs may have.
    ``pooling_type="SPLADE"`` makes a plain ``*ForMaskedLM`` folder a SPLADE sparse encoder (max of
    ``log(1 + relu(MLM logits))``), as a sentence-transformers ``SpladePooling`` module would.
    ``logit_mean`` / ``logit_sigma`` (vLLM's) calibrate a classifier's or reranker's logit to
    ``(logit - mean) / sigma`` before its activation, so scores of different rerankers mean the same.
    ``use_activation`` on an embedding model is vLLM 0.32's name of ``normalize``. ``activation``
    names the classifier's function (poolrag's); given as a boolean it is vLLM's older spelling of
    ``use_activation``. ``seq_pooling_type`` / ``tok_pooling_type`` (vLLM 0.32's split of
    ``pooling_type``) are folded into ``pooling_type`` (see :func:`_one_pooling_type`).

    ``task`` is vLLM's: the task the model is pooled for. It must be one the model runs (refused at
    load otherwise), and it decides what ``score`` computes, as vLLM's score type follows it:
    ``token_embed`` scores by MaxSim over the token vectors (late interaction, e.g. BGE-M3's
    ColBERT head), ``embed`` by the similarity of the pooled vectors, ``classify`` by a
    cross-encoder's joint pass; it is also what ``/pooling`` runs for a request naming no task.
    Unlike vLLM, the model's other tasks stay callable. It changes no vector, so it is kept out of
    the outputs' fingerprint, and ``repr`` shows it only when set (a tune verdict keys on ``repr``).
    """

    pooling_type: PoolingType | None = None
    normalize: bool | None = None
    activation: Activation | bool | None = None
    use_activation: bool | None = None
    step_tag_id: int | None = None
    returned_token_ids: tuple[int, ...] | None = None
    dimensions: int | None = None
    enable_chunked_processing: bool | None = None
    max_embed_len: int | None = None
    logit_mean: float | None = None
    logit_sigma: float | None = None
    task: PoolingTask | None = None
    seq_pooling_type: InitVar[str | None] = None
    tok_pooling_type: InitVar[str | None] = None

    def __post_init__(self, seq_pooling_type: str | None, tok_pooling_type: str | None) -> None:
        named = {"pooling_type": self.pooling_type}
        named |= {"seq_pooling_type": seq_pooling_type, "tok_pooling_type": tok_pooling_type}
        object.__setattr__(self, "pooling_type", _one_pooling_type(named))
        for name in ("normalize", "use_activation", "enable_chunked_processing"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, bool):  # "False" would read as true
                raise InvalidInputError(f"pooler_config {name} must be true or false, got {value!r}")
        if self.task is not None and self.task not in POOLER_TASKS:
            hint = " (a score is computed by embed, token_embed or classify: name that one)"
            raise InvalidInputError(
                f"unknown pooler_config task {self.task!r}; known: {', '.join(POOLER_TASKS)}"
                + (hint if self.task == "score" else "")
            )
        if isinstance(self.activation, bool):  # vLLM's older key: whether a classifier applies its activation
            if self.use_activation is not None and self.use_activation != self.activation:
                raise InvalidInputError(
                    "pooler_config activation and use_activation disagree; a boolean activation is "
                    "vLLM's alias of use_activation, give one of them"
                )
        elif self.activation is not None and self.activation not in get_args(Activation):
            raise InvalidInputError(
                f"pooler_config activation must be one of {', '.join(get_args(Activation))} (the function "
                f"to apply) or a boolean (vLLM's alias of use_activation), got {self.activation!r}"
            )
        for name in ("logit_mean", "logit_sigma"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
            ):
                raise InvalidInputError(f"{name} must be a finite number, got {value!r}")
        if self.logit_sigma is not None and self.logit_sigma <= 0:
            raise InvalidInputError(f"logit_sigma must be greater than 0, got {self.logit_sigma!r}")

    def __repr__(self) -> str:
        shown = (f for f in fields(self) if f.name != "task" or self.task is not None)
        return f"PoolerConfig({', '.join(f'{f.name}={getattr(self, f.name)!r}' for f in shown)})"

    @classmethod
    def from_value(cls, value: PoolerConfig | dict[str, Any] | str | None) -> PoolerConfig:
        """A config from a dict, or from the JSON text vLLM's docs and command lines pass."""
        if value is None:
            return cls()
        if isinstance(value, PoolerConfig):
            return value
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise InvalidInputError(f"pooler_config is not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise InvalidInputError(
                f"pooler_config must be a PoolerConfig, a dict or a JSON object, not {type(value).__name__}"
            )
        known = {f.name for f in fields(cls)} | set(_SPLIT_POOLING_KEYS) | set(_KERNEL_KEYS)
        if unknown := set(value) - known:
            raise InvalidInputError(f"unknown pooler_config keys: {sorted(unknown)}; known: {sorted(known)}")
        data = {k: v for k, v in value.items() if k not in _KERNEL_KEYS}
        if data.get("returned_token_ids") is not None:
            data["returned_token_ids"] = tuple(int(t) for t in data["returned_token_ids"])
        check_optional_count(data.get("max_embed_len"), "max_embed_len")
        return cls(**data)

    @property
    def activation_function(self) -> Activation | None:
        """The classifier's function named here (``activation`` as a name), if any."""
        return None if isinstance(self.activation, bool) else self.activation

    @property
    def classifier_switch(self) -> bool | None:
        """Whether a classifier applies its activation, as set here: ``use_activation``, or a
        boolean ``activation`` (vLLM's older key, for classification models only)."""
        if self.use_activation is not None:
            return self.use_activation
        return self.activation if isinstance(self.activation, bool) else None

    def normalize_switch(self) -> bool | None:
        """Whether an embedding model normalises, as the caller set it: ``normalize``, or vLLM 0.32's
        ``use_activation`` (its only spelling there); the two must agree when both are given."""
        given = {self.normalize, self.use_activation} - {None}
        if len(given) > 1:
            raise InvalidInputError(
                "pooler_config normalize and use_activation disagree; on an embedding model they "
                "are the same switch, give one"
            )
        return self.normalize if self.normalize is not None else self.use_activation

    def merged_over(self, defaults: PoolerConfig) -> PoolerConfig:
        """Fields set here win; unset ones come from ``defaults``."""
        return replace(
            defaults, **{f.name: value for f in fields(self) if (value := getattr(self, f.name)) is not None}
        )


def _one_pooling_type(named: dict[str, Any]) -> Any:
    """``pooling_type``, or vLLM 0.32's ``seq_pooling_type`` / ``tok_pooling_type``. poolrag pools
    each model one way: a token method alone is that method (``ALL`` gives a reward model its
    per-token rows, as in vLLM); beside a sequence method a token ``ALL`` adds nothing (token tasks
    pool every token), and any other pair must be one method."""
    methods: dict[str, str] = {}
    for key, kind in named.items():
        if kind is None:
            continue
        kind = str(kind).upper()
        if kind not in POOLING_TYPES:
            raise InvalidInputError(f"unknown {key} {named[key]!r}; known: {', '.join(POOLING_TYPES)}")
        methods[key] = kind
    if len(set(methods.values())) > 1 and methods.get("tok_pooling_type") == "ALL":
        del methods["tok_pooling_type"]  # token tasks pool every token anyway
    if len(set(methods.values())) > 1:
        raise InvalidInputError(
            f"pooler_config names two pooling methods ({', '.join(f'{k}={v}' for k, v in methods.items())}); "
            "poolrag pools each model one way: give one"
        )
    return next(iter(methods.values()), None)
