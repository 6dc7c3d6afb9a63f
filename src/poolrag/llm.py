"""``poolrag.LLM``: vLLM's offline pooling front door, so vLLM code runs with its imports changed.

A thin layer over :class:`~poolrag.Engine`: it translates vLLM's constructor arguments
(``runner``, ``convert``, ``pooler_config`` as a JSON string, ...) and method keywords
(``truncate_prompt_tokens``, ``use_tqdm``, ``lora_request``) and returns vLLM's output types
(:mod:`poolrag.vllm_outputs`: lists of floats, tensors); the Engine and its ``*_array`` calls keep
numpy, the fast path. vLLM's engine options are mapped to poolrag's (``max_num_seqs``,
``enforce_eager``, ``max_num_batched_tokens``), accepted with one warning when they only tune
vLLM's KV cache, scheduler or GPU memory (:mod:`poolrag.vllm_options`), or refused when poolrag
cannot honour them; never dropped.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

import numpy as np
import torch

from poolrag.config.option_choices import DTypeName, Quantization
from poolrag.config.pooler_config import PoolerConfig
from poolrag.engine import Engine
from poolrag.engine_args import ENGINE_OPTIONS, EngineArgs, with_tei_pooling
from poolrag.errors import GenerativeCheckpointError, InputTooLongError, InputTypeError, InvalidInputError
from poolrag.input_shapes import prompt_list
from poolrag.model_facts import ScoreKind
from poolrag.params import PoolingParams, PoolingTask
from poolrag.prompt_inputs import LLMPrompts, LLMScoreSide
from poolrag.tokenization.tokenizer_lock import call_tokenizer
from poolrag.vllm_inputs import engine_prompts, per_prompt_params, score_side, truncation
from poolrag.vllm_options import (
    NO_EFFECT_OPTIONS,
    eager_compile,
    refuse_longer_cut,
    refuse_parallelism,
    warn_no_effect,
)
from poolrag.vllm_outputs import (
    ClassificationRequestOutput,
    EmbeddingRequestOutput,
    LateChunkingMetadata,
    PoolingOutput,
    PoolingRequestOutput,
    ScoringRequestOutput,
    to_vllm,
)
from poolrag.vllm_progress import PromptsBar

logger = logging.getLogger(__name__)

RUNNERS = ("auto", "pooling")
# vLLM's convert values -> Engine's convert (None: use the checkpoint as it is)
CONVERTS: dict[str, str | None] = {
    "auto": None,
    "none": None,
    "embed": "embed",
    "classify": "classify",
    "reward": "reward",
}


def _params(
    pooling_params: PoolingParams | None,
    truncate_prompt_tokens: int | None,
    lora_request: object,
    max_model_len: int,
) -> PoolingParams | None:
    """vLLM's per-call keywords folded into poolrag's PoolingParams, a cut over ``max_model_len``
    refused as vLLM refuses it."""
    if lora_request is not None:
        raise InvalidInputError("LoRA adapters are not supported: poolrag serves the checkpoint as loaded")
    params = pooling_params
    if truncate_prompt_tokens is not None:
        params = pooling_params or PoolingParams()  # the call's keyword asks for a cut: it wins
        params = params.with_updates(truncate_prompt_tokens=truncate_prompt_tokens, truncate=None)
    refuse_longer_cut(params.truncate_prompt_tokens if params else None, max_model_len)
    return params


_WHOLE_TEXT = "late chunking maps each chunk back to the whole text"


def _asks_late_chunking(pooling_params: PoolingParams | Sequence[PoolingParams] | None) -> bool:
    """Whether a call's parameters (one, or one per prompt) ask for vLLM's late chunking."""
    given = [pooling_params] if isinstance(pooling_params, PoolingParams) else pooling_params or []
    return any(isinstance(p, PoolingParams) and p.late_chunking_params is not None for p in given)


def _engine_options(given: dict[str, Any]) -> dict[str, Any]:
    """vLLM's engine keywords as Engine options: mapped, warned about once, or refused."""
    options = dict(given)
    refuse_parallelism(
        options.pop("tensor_parallel_size", 1),
        options.pop("pipeline_parallel_size", 1),
        options.pop("data_parallel_size", 1),
    )
    if options.pop("tokenizer_mode", "auto") not in ("auto", "hf"):
        raise InvalidInputError("tokenizer_mode must be 'auto' or 'hf' (poolrag runs the HF tokenizer)")
    if options.pop("skip_tokenizer_init", False):
        raise InvalidInputError("skip_tokenizer_init=True is not supported: poolrag tokenises every text")
    options.pop("served_model_name", None)  # the LLM's model_config reports it; it names nothing else
    if "max_num_batched_tokens" in options:
        options.setdefault("max_batch_tokens", options.pop("max_num_batched_tokens"))
    if "max_num_seqs" in options:
        options.setdefault("max_batch_size", options.pop("max_num_seqs"))
    # the names EngineArgs.add_cli_args' flags set, for a vLLM example's LLM(**vars(args))
    if "auto_truncate" in options:
        options.setdefault("truncate", options.pop("auto_truncate"))
    if "autotune" in options:
        options.setdefault("tune", options.pop("autotune"))
    if "pooling" in options:  # text-embeddings-router's --pooling, folded into the pooler config
        options["pooler_config"] = with_tei_pooling(options.get("pooler_config"), options.pop("pooling"))
    if "enforce_eager" in options:
        options["compile"] = eager_compile(options.pop("enforce_eager"), options.get("compile"))
    no_effect = sorted(set(NO_EFFECT_OPTIONS) & set(options))
    warn_no_effect(no_effect, logger)
    for name in no_effect:
        del options[name]
    return options  # what is left is EngineArgs' to check (an unknown name: one line naming it)


@dataclass(frozen=True)
class ModelConfig:
    """The part of vLLM's ``ModelConfig`` pooling scripts read (``hf_config.id2label`` for NER
    labels, the length, the pooler, the dtype and quantization a script logs, the Matryoshka sizes
    it picks ``dimensions`` from), at ``llm.model_config`` and
    ``llm.llm_engine.vllm_config.model_config``."""

    model: str
    hf_config: Any
    max_model_len: int
    pooler_config: PoolerConfig | None = None
    is_cross_encoder: bool = False
    runner_type: str = "pooling"
    dtype: Any = None  # the torch.dtype the weights run in, as vLLM's
    quantization: str | None = None
    is_matryoshka: bool = False
    matryoshka_dimensions: list[int] | None = None
    served_name: str | list[str] | None = None  # LLM(served_model_name=...), as given
    output_size: int | None = None  # the embed (or ColBERT token) vector's size; None: no vectors

    @property
    def embedding_size(self) -> int:
        """As vLLM's: the size of the vectors the model returns (after a sentence-transformers
        ``Dense`` layer), else the hidden size; vLLM's tests size their checks by it."""
        return self.output_size if self.output_size is not None else self.get_hidden_size()

    @property
    def served_model_name(self) -> str:
        """As vLLM's: the name given (the first of a list), else the model as given."""
        if not self.served_name:
            return self.model
        return self.served_name[0] if isinstance(self.served_name, list) else self.served_name

    @property
    def architecture(self) -> str:
        """The checkpoint's first architecture name, as vLLM reports the one it resolved."""
        return str((getattr(self.hf_config, "architectures", None) or [""])[0])

    def get_hidden_size(self) -> int:
        """The backbone's hidden size, as vLLM reads it from the text config."""
        return int(self.hf_config.get_text_config().hidden_size)

    def get_vocab_size(self) -> int:
        """The tokenizer vocabulary the text config declares, as vLLM reads it."""
        return int(self.hf_config.get_text_config().vocab_size)


@dataclass(frozen=True)
class _VllmConfig:
    model_config: ModelConfig


@dataclass(frozen=True)
class _EngineView:
    """``llm.llm_engine`` as vLLM scripts reach into it: its configs and tasks, nothing to drive."""

    model_config: ModelConfig
    vllm_config: _VllmConfig
    supported_tasks: tuple[PoolingTask, ...] = ()
    tokenizer: Any = None

    def get_supported_tasks(self) -> tuple[PoolingTask, ...]:
        return self.supported_tasks

    def get_tokenizer(self) -> Any:
        """The model's tokenizer, as ``llm.get_tokenizer()`` (scripts reach for it here too)."""
        return self.tokenizer


class LLM:
    """vLLM's ``LLM`` for pooling models: ``embed``, ``classify``, ``score``, ``reward``, ``encode``.

    Args:
        model: hub id or local folder.
        runner: ``"auto"`` or ``"pooling"``; poolrag serves pooling models only, so ``"generate"``
            is refused.
        convert: vLLM's ``--convert``: ``"auto"`` uses the checkpoint as it is; ``"embed"`` pools the
            backbone's hidden states (LAST for decoders); ``"classify"`` turns a ``*ForCausalLM`` into
            a classifier (with ``hf_overrides["classifier_from_token"]``) and is a no-op on a
            ``*ForSequenceClassification``; ``"reward"`` makes a ``*ForCausalLM`` a process reward model
            (with a ``pooler_config`` naming its step tokens) and is a no-op on reward models.
        pooler_config: a dict, a :class:`~poolrag.PoolerConfig` or a JSON string.
        hf_overrides, trust_remote_code, dtype, max_model_len, quantization, tokenizer, revision:
            as vLLM's (``quantization``: ``"fp8"`` on CUDA, or poolrag's ``"int8"``).
        **engine_options: :class:`~poolrag.Engine` options (``device``, ``score_template``,
            ``download_dir``, ``hf_token``, ``tokenizer_revision``, ...); ``max_num_batched_tokens``
            maps to ``max_batch_tokens``, ``max_num_seqs`` to ``max_batch_size``, ``enforce_eager``
            means no compile, not even one a tune verdict chose; ``tensor_parallel_size`` /
            ``pipeline_parallel_size`` / ``data_parallel_size`` must be 1 (use ``device_map="auto"``
            to spread a large model); ``tokenizer_mode`` ``"auto"``/``"hf"`` and
            ``skip_tokenizer_init=False`` are taken; vLLM's cache / scheduler / memory options are
            accepted with one warning; ``served_model_name`` is what ``model_config`` reports, as in
            vLLM. As in vLLM, an over-long prompt is
            an error unless a call truncates (``truncate_prompt_tokens``, ``tokenization_kwargs``);
            ``truncate=True`` makes poolrag's default (keep the first tokens) this LLM's.

    Every method takes vLLM's per-call keywords: prompts in any of its shapes, ``tokenization_kwargs``
    (:func:`poolrag.vllm_inputs.truncation`), one ``PoolingParams`` or one per prompt.
    """

    def __init__(
        self,
        model: str | os.PathLike[str],
        *,
        runner: Literal["auto", "pooling"] = "auto",
        convert: Literal["auto", "none", "embed", "classify", "reward"] = "auto",
        pooler_config: PoolerConfig | dict[str, Any] | str | None = None,
        hf_overrides: dict[str, Any] | None = None,
        trust_remote_code: bool = False,
        dtype: DTypeName = "auto",
        max_model_len: int | None = None,
        quantization: Quantization | None = None,
        tokenizer: str | None = None,
        revision: str | None = None,
        **engine_options: Any,
    ) -> None:
        if runner == "generate":
            raise InvalidInputError(
                "runner='generate' is not supported: poolrag serves pooling models only "
                "(embed, classify, score, reward, encode); use vLLM to generate text"
            )
        if runner not in RUNNERS:
            raise InvalidInputError(f"runner must be one of {', '.join(RUNNERS)}, not {runner!r}")
        if convert not in CONVERTS:
            raise InvalidInputError(f"convert must be one of {', '.join(CONVERTS)}, not {convert!r}")
        named = {name: value for name, value in locals().items() if name in ENGINE_OPTIONS}
        # vLLM refuses an over-long prompt unless a call asks to truncate it
        named |= {"convert": CONVERTS[convert], "truncate": False}
        self._served_name = engine_options.get("served_model_name")
        self.engine_args = EngineArgs.from_options(model, named | _engine_options(engine_options))
        try:
            self.engine = Engine.from_engine_args(self.engine_args)
        except GenerativeCheckpointError:
            if runner != "pooling" or convert != "auto":
                raise
            # vLLM's default conversion for runner="pooling": the checkpoint's hidden states, pooled
            logger.info("runner='pooling' on a text-generation checkpoint: convert='embed', as in vLLM")
            self.engine_args = self.engine_args.replace(convert="embed")
            self.engine = Engine.from_engine_args(self.engine_args)
        self._request_ids = itertools.count()  # vLLM numbers requests over an LLM's life, not per call

    @property
    def supported_tasks(self) -> tuple[PoolingTask, ...]:
        """The pooling tasks the model runs (vLLM's ``llm.supported_tasks``)."""
        return self.engine.supported_tasks

    @property
    def model_config(self) -> ModelConfig:
        """The part of vLLM's ``ModelConfig`` pooling scripts read (``hf_config``, ``max_model_len``...)."""
        facts = self.engine.facts
        dims = facts.matryoshka_dimensions
        return ModelConfig(
            self.engine.model_name,
            self.engine.spec.hf_config,
            self.engine.max_model_len,
            self.engine.pooler_config,
            facts.score_kind is ScoreKind.CROSS_ENCODER,
            dtype=self.engine.dtype,
            quantization=self.engine_args.quantization,
            is_matryoshka=facts.is_matryoshka,
            matryoshka_dimensions=None if dims is None else list(dims),
            served_name=self._served_name,
            output_size=facts.embedding_dim,
        )

    @property
    def llm_engine(self) -> _EngineView:
        """``llm.llm_engine`` as vLLM scripts reach into it (its configs and tasks)."""
        config = self.model_config
        return _EngineView(config, _VllmConfig(config), self.supported_tasks, self.engine.tokenizer)

    def generate(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Refused as vLLM refuses it on a pooling model: a ``ValueError`` saying what runs here."""
        raise InvalidInputError(
            "LLM.generate() needs a generative model: poolrag runs pooling models only "
            f"(this one: {', '.join(self.supported_tasks)}); use vLLM to generate text"
        )

    chat = generate
    beam_search = generate

    def get_tokenizer(self) -> Any:
        """The model's transformers tokenizer, as vLLM's ``llm.get_tokenizer()``."""
        return self.engine.tokenizer

    def embed(
        self,
        prompts: LLMPrompts,
        pooling_params: PoolingParams | Sequence[PoolingParams] | None = None,
        *,
        truncate_prompt_tokens: int | None = None,
        tokenization_kwargs: dict[str, Any] | None = None,
        use_tqdm: bool | Callable[..., Any] = True,
        lora_request: object = None,
    ) -> list[EmbeddingRequestOutput]:
        """One vector per prompt (``outputs.embedding``, a list of floats)."""
        truncate = truncation(tokenization_kwargs, truncate_prompt_tokens)
        return self._run(self.engine.embed, prompts, pooling_params, truncate, lora_request, use_tqdm)

    def classify(
        self,
        prompts: LLMPrompts,
        pooling_params: PoolingParams | Sequence[PoolingParams] | None = None,
        *,
        truncate_prompt_tokens: int | None = None,
        tokenization_kwargs: dict[str, Any] | None = None,
        use_tqdm: bool | Callable[..., Any] = True,
        lora_request: object = None,
    ) -> list[ClassificationRequestOutput]:
        """Class probabilities per prompt (``outputs.probs``, a list of floats)."""
        truncate = truncation(tokenization_kwargs, truncate_prompt_tokens)
        return self._run(self.engine.classify, prompts, pooling_params, truncate, lora_request, use_tqdm)

    def reward(
        self,
        prompts: LLMPrompts,
        pooling_params: PoolingParams | Sequence[PoolingParams] | None = None,
        *,
        truncate_prompt_tokens: int | None = None,
        tokenization_kwargs: dict[str, Any] | None = None,
        use_tqdm: bool | Callable[..., Any] = True,
        lora_request: object = None,
    ) -> list[PoolingRequestOutput[PoolingOutput]]:
        """Reward data per prompt: one value for a sequence reward model, per-token (or per-step)
        rows for a token classifier or process reward model, as vLLM returns them."""
        truncate = truncation(tokenization_kwargs, truncate_prompt_tokens)
        return self._run(self.engine.reward, prompts, pooling_params, truncate, lora_request, use_tqdm)

    def score(
        self,
        data_1: LLMScoreSide,
        data_2: LLMScoreSide,
        /,
        pooling_params: PoolingParams | None = None,
        *,
        truncate_prompt_tokens: int | None = None,
        tokenization_kwargs: dict[str, Any] | None = None,
        use_tqdm: bool | Callable[..., Any] = True,
        lora_request: object = None,
        score_template: str | None = None,
        chat_template: str | None = None,
    ) -> list[ScoringRequestOutput]:
        """Relevance of each ``data_2`` item to ``data_1`` (1:1, 1:N or N:N), ``outputs.score``.

        ``chat_template`` is vLLM's name for the pair template: a vLLM template file (or text) as
        it ships, reading ``messages``, or anything ``score_template`` takes.
        """
        if chat_template is not None:
            if score_template is not None and score_template != chat_template:
                raise InvalidInputError("give chat_template or score_template, not both")
            score_template = chat_template
        if pooling_params is not None and not isinstance(pooling_params, PoolingParams):
            kind = type(pooling_params).__name__
            raise InputTypeError(f"score takes one PoolingParams for all its pairs (as vLLM's), not a {kind}")
        truncate = truncation(tokenization_kwargs, truncate_prompt_tokens)
        params = _params(pooling_params, truncate, lora_request, self.engine.facts.max_model_len)
        first, second = score_side(data_1), score_side(data_2)  # vLLM's multimodal forms: images
        pairs = max(len(side) if isinstance(side, list) else 1 for side in (first, second))
        with PromptsBar(use_tqdm, pairs) as bar, bar.covering(pairs):
            results = self.engine.score(first, second, params, score_template=score_template)
        return to_vllm(results, self._request_ids)

    def encode(
        self,
        prompts: LLMPrompts,
        pooling_params: PoolingParams | Sequence[PoolingParams] | None = None,
        *,
        pooling_task: PoolingTask | None = None,
        truncate_prompt_tokens: int | None = None,
        tokenization_kwargs: dict[str, Any] | None = None,
        use_tqdm: bool | Callable[..., Any] = True,
        lora_request: object = None,
    ) -> list[PoolingRequestOutput[PoolingOutput]]:
        """Any task's raw data (``outputs.data``, a tensor); ``pooling_task`` is required, as in vLLM.

        ``sparse_embed`` (SPLADE, BGE-M3) gives token id / weight records
        (:data:`~poolrag.outputs.SPARSE_ENTRY`, a numpy record array: vLLM has no such task);
        ``LLM.engine.sparse_embed`` gives ``SparseVector`` s.
        """
        if pooling_task is None:
            raise InvalidInputError(f"encode() needs pooling_task, one of: {', '.join(self.supported_tasks)}")
        late = _asks_late_chunking(pooling_params)
        if late and pooling_task != "token_embed":
            raise InvalidInputError(
                "late_chunking_params chunks token vectors: it applies to pooling_task='token_embed'",
                param="late_chunking_params",
            )
        truncate = truncation(tokenization_kwargs, truncate_prompt_tokens)
        if late:
            return self._late_chunked(prompts, pooling_params, truncate, lora_request, use_tqdm)
        return self._run(
            self._encoding(pooling_task), prompts, pooling_params, truncate, lora_request, use_tqdm
        )

    def _encoding(self, task: PoolingTask) -> Callable[[Any, PoolingParams | None], list[Any]]:
        return lambda items, params: self.engine.encode(items, task, params)

    def _late_chunked(
        self,
        prompts: Any,
        pooling_params: PoolingParams | Sequence[PoolingParams] | None,
        truncate: int | None,
        lora_request: object,
        use_tqdm: bool | Callable[..., Any],
    ) -> list[Any]:
        """vLLM's late chunking of ``token_embed``: each text's token vectors as the model gives
        them, every token included, averaged ``chunk_size`` tokens at a time, then normalised
        unless switched off; prompts without ``late_chunking_params`` get their token vectors."""
        if truncate is not None:
            raise InvalidInputError(_WHOLE_TEXT + ": truncation is refused, as in vLLM")
        listed = prompt_list(engine_prompts(prompts))
        per_prompt = per_prompt_params(pooling_params, len(listed))
        if per_prompt is None:
            per_prompt = [pooling_params if isinstance(pooling_params, PoolingParams) else None] * len(listed)
        for index, params in enumerate(per_prompt):
            if (
                params is not None
                and params.late_chunking_params is not None
                and not isinstance(listed[index], str)
            ):
                raise InputTypeError(
                    f"prompts[{index}]: late chunking reads a text prompt, not token ids or an image"
                )

        def run(items: list[Any], params: PoolingParams | None) -> list[Any]:
            if params is not None and params.late_chunking_params is not None:
                return self._late_chunks(items, params, lora_request)
            return self._run(self._encoding("token_embed"), items, params, None, lora_request, numbered=False)

        with PromptsBar(use_tqdm, len(listed)) as bar:
            results = _grouped(listed, per_prompt, bar, run)
        for output in results:  # numbered in the prompts' order once all groups ran, as vLLM's are
            output.request_id = str(next(self._request_ids))
        return results

    def _late_chunks(self, texts: list[Any], params: PoolingParams, lora_request: object) -> list[Any]:
        """One group's late-chunked outputs (see :meth:`_late_chunked`)."""
        chunking = params.late_chunking_params
        assert chunking is not None
        default = PoolerConfig.from_value(self.engine_args.pooler_config).normalize_switch()
        normalize = next(
            (v for v in (params.normalize, params.use_activation, default) if v is not None), True
        )
        if (
            params.normalize is not None
            and params.use_activation is not None
            and params.normalize != params.use_activation
        ):
            raise InvalidInputError(
                "normalize and use_activation disagree; on vectors they are the same switch, give one"
            )
        if params.truncate_prompt_tokens is not None:
            raise InvalidInputError(
                _WHOLE_TEXT + ": truncation is refused, as in vLLM", param="truncate_prompt_tokens"
            )
        raw = params.with_updates(late_chunking_params=None, normalize=False, use_activation=None)
        try:
            outputs = self.engine.encode(
                texts, "token_embed", _params(raw, None, lora_request, self.engine.facts.max_model_len)
            )
        except InputTooLongError as exc:  # truncation, the usual remedy, is refused here
            remedy = _WHOLE_TEXT + ": split it into texts the model can read"
            raise InputTooLongError(exc.num_tokens, exc.max_len, exc.field, exc.index, remedy) from None
        chunked = []
        for text, output in zip(texts, outputs, strict=True):
            ids = list(output.prompt_token_ids)
            offsets = self._token_offsets(text, ids)
            rows = np.asarray(output.outputs.data, dtype=np.float32)
            if len(rows) != len(ids):
                raise InvalidInputError(
                    f"late chunking averages one vector per token; this model's token_embed gives "
                    f"{len(rows)} for {len(ids)} tokens (it drops some, as a ColBERT model or BGE-M3 does)"
                )
            size = chunking.chunk_size
            means = np.stack([rows[start : start + size].mean(axis=0) for start in range(0, len(rows), size)])
            if normalize:
                means /= np.maximum(np.linalg.norm(means, axis=-1, keepdims=True), 1e-12)
            chunked.append(
                PoolingRequestOutput(
                    request_id="",  # numbered by _late_chunked, in the prompts' order
                    outputs=PoolingOutput(torch.from_numpy(means)),  # vLLM's outputs.data: a CPU tensor
                    prompt_token_ids=ids,
                    prompt=text,
                    late_chunking=LateChunkingMetadata.of(offsets, size),
                )
            )
        return chunked

    def _token_offsets(self, text: str, ids: list[int]) -> list[tuple[int, int]]:
        """The characters of ``text`` each of the model's tokens ``ids`` came from, by the fast
        tokenizer's offsets; refused where the model read other tokens than the text's own (a
        prompt the folder adds)."""
        try:
            encoded = call_tokenizer(
                self.engine.tokenizer,
                text,
                add_special_tokens=True,
                return_offsets_mapping=True,
                return_attention_mask=False,
                return_token_type_ids=False,
            )
        except NotImplementedError:
            raise InvalidInputError(
                "late chunking needs a fast tokenizer, whose offsets map tokens to text"
            ) from None
        if list(encoded["input_ids"]) != ids:
            raise InvalidInputError(
                "late chunking maps tokens back to the text, but the model read other tokens than the "
                "text's own (a prompt its folder adds before each text)"
            )
        return [tuple(pair) for pair in encoded["offset_mapping"]]

    def _run(
        self,
        call: Callable[[Any, PoolingParams | None], list[Any]],
        prompts: Any,
        pooling_params: PoolingParams | Sequence[PoolingParams] | None,
        truncate: int | None,
        lora_request: object,
        use_tqdm: bool | Callable[..., Any] = False,
        numbered: bool = True,
    ) -> list[Any]:
        """One task over vLLM's inputs (``truncate``: the call's cut, from :func:`truncation`) in the
        Engine's form; a list of ``PoolingParams`` runs each distinct one over its prompts (batched
        with the others by the engine's scheduler only within one call), the results back in the
        prompts' order. ``numbered=False``: no request ids taken from the LLM's count (a caller
        numbering a whole call made of several runs does it). ``use_tqdm``: vLLM's bar over the prompts."""
        items = engine_prompts(prompts)
        listed = prompt_list(items)
        per_prompt = per_prompt_params(pooling_params, len(listed))
        longest = self.engine.facts.max_model_len
        with PromptsBar(use_tqdm, len(listed)) as bar:
            if per_prompt is None:
                single = pooling_params if isinstance(pooling_params, PoolingParams) else None
                with bar.covering(len(listed)):
                    results = call(items, _params(single, truncate, lora_request, longest))
            else:
                results = _grouped(
                    listed,
                    per_prompt,
                    bar,
                    lambda group, p: call(group, _params(p, truncate, lora_request, longest)),
                )
        return to_vllm(results, self._request_ids if numbered else None)


def _grouped(
    listed: list[Any],
    per_prompt: list[PoolingParams | None],
    bar: PromptsBar,
    run: Callable[[list[Any], PoolingParams | None], list[Any]],
) -> list[Any]:
    """``run`` once per distinct ``PoolingParams`` over the prompts given it, in the order first
    given, the results back in the prompts' order."""
    groups: dict[PoolingParams | None, list[int]] = {}
    for index, params in enumerate(per_prompt):
        groups.setdefault(params, []).append(index)
    results: list[Any] = [None] * len(listed)
    for params, indices in groups.items():
        with bar.covering(len(indices)):
            outputs = run([listed[i] for i in indices], params)
        for index, output in zip(indices, outputs, strict=True):
            results[index] = output
    return results
