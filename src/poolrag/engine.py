"""The offline API: ``Engine.embed / classify / score / reward / encode``, plus ``sparse_embed``
and ``encode_multi`` (dense + sparse + ColBERT from one pass) for hybrid search.

Named and shaped like vLLM's ``LLM`` pooling methods. The engine only validates and shapes
requests and results; tokenisation, batching, the forward pass and pooling live in the layers
below it.
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Callable, Generator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import torch

from poolrag.config.option_choices import (
    CompileMode,
    Convert,
    CpuFastMode,
    DTypeName,
    ModelImpl,
    Quantization,
    TuneMode,
)
from poolrag.config.pooler_config import PoolerConfig
from poolrag.core.autotune import TuneReport
from poolrag.core.engine_build import build_engine
from poolrag.core.engine_core import CoreStats
from poolrag.core.model_setup import Pipeline
from poolrag.engine_args import ENGINE_OPTIONS, EngineArgs
from poolrag.errors import InvalidInputError, ModelLoadError, UnsupportedTaskError
from poolrag.image_inputs import is_image_input
from poolrag.input_shapes import item_list, prompt_list, score_pairs
from poolrag.loading.cpu_fast_mode import FastModeReport, probe_requests
from poolrag.loop_work import stays_on_loop
from poolrag.model_facts import ModelFacts, ScoreKind
from poolrag.outputs import (
    ClassificationOutput,
    EmbeddingOutput,
    PoolingOutput,
    PoolingRequestOutput,
    ScoringOutput,
)
from poolrag.params import MULTI_VECTOR_TASK, PoolingParams, PoolingTask
from poolrag.pooling.heads import activate, to_numpy
from poolrag.postprocess.entities import Entity, group_entities
from poolrag.prompt_inputs import Prompts, ScoreInput, ScoreSide
from poolrag.request import PoolingRequest, ResolvedParams
from poolrag.scoring.similarity import maxsim, similarity_by_name
from poolrag.sparse.vector import SparseVector
from poolrag.tokenization.input_processor import checked_texts
from poolrag.tokenization.late_chunks import (
    LATE_CHUNK_TASK,
    check_spans,
    late_chunking_refused,
    plan_late_chunks,
)
from poolrag.tokenization.score_template import ScoreTemplate, load_score_template, templated_pair_requests
from poolrag.tokenization.tokenizer_lock import call_tokenizer, tokenizer_lock

if TYPE_CHECKING:  # the compiler stack loads only when compile is on
    from poolrag.compile.background import BackgroundCompile, CompileReport

logger = logging.getLogger(__name__)

T = TypeVar("T")
Out = TypeVar("Out", EmbeddingOutput, ClassificationOutput, PoolingOutput)
# A task method written once for both front doors: it yields its requests, receives their results.
Steps = Generator[list[PoolingRequest], list[np.ndarray], T]


#: each engine of this process by what it was made from, to know one inherited by a forked child
_LOADED: weakref.WeakValueDictionary[tuple[str, str], Engine] = weakref.WeakValueDictionary()


def _load_engine(cls: type[Engine], args: EngineArgs, identity: str) -> Engine:
    """An unpickled engine: in a forked child that inherited the very engine (LlamaIndex's
    ``IngestionPipeline.arun(num_workers=)`` forks, then sends its transforms), that one, which the
    fork keeps working; a second load there hung forever in GNU OpenMP, which does not survive a
    fork, and doubled the memory. Elsewhere the same arguments loaded again, which must give the same
    weights (a hub id without a revision can resolve to another snapshot in another process)."""
    inherited = _LOADED.get((identity, repr(args)))
    if inherited is not None and inherited._loaded_in != os.getpid() and not inherited.closed:
        logger.info("using the engine process %d inherited from its parent for %s", os.getpid(), args.model)
        return inherited
    logger.info("loading %s again in process %d (an Engine was unpickled here)", args.model, os.getpid())
    engine = cls.from_engine_args(args)
    if engine.facts.model_identity != identity:
        raise ModelLoadError(
            f"the unpickled engine's {args.model!r} loaded other weights here "
            f"({engine.facts.model_identity}) than the pickled one had ({identity}); pin a revision "
            "or pass a model folder"
        )
    return engine


def _scores(outputs: Sequence[PoolingRequestOutput[ScoringOutput]]) -> np.ndarray:
    return np.asarray([out.outputs.score for out in outputs], dtype=np.float64)


def _sparse_vector(entries: np.ndarray) -> SparseVector:
    """A pooler's :data:`SPARSE_ENTRY` records (sorted by id, non-zero) as a :class:`SparseVector`."""
    return SparseVector(entries["index"], entries["value"])


def _one_label_score(logits: np.ndarray) -> ScoringOutput:
    """A cross-encoder's score: the value of its one label."""
    return ScoringOutput(float(logits[0]))


@dataclass(frozen=True, eq=False)
class MultiVector:
    """The three vectors a BGE-M3-style model gives one text from one forward pass.

    Attributes:
        dense: the pooled (CLS) vector, ``[D]`` float32 (normalised as ``embed`` is).
        sparse: token id → weight (what ``sparse_embed`` returns).
        colbert: one vector per token after the first, ``[T - 1, D']`` float32 (``token_embed``).
    """

    dense: np.ndarray
    sparse: SparseVector
    colbert: np.ndarray


def _inline(inputs: tuple[object, ...]) -> bool:
    """Whether a call's inputs (texts, prompt lists, spans) are tokenised on the event loop
    (:func:`poolrag.loop_work.stays_on_loop`, the one rule of what leaves the loop)."""
    chars = texts = images = 0
    for value in inputs:
        one = isinstance(value, (str, bytes, bytearray, memoryview)) or not isinstance(value, Sequence)
        for item in (value,) if one else value:
            if is_image_input(item):
                images += 1
            else:  # a text, a token prompt, a span
                texts += 1
                chars += len(item) if isinstance(item, str) else 0
    return stays_on_loop(text_chars=chars, texts=texts, images=images)


class Engine:
    """Load a pooling model once and run any of its tasks.

    Args:
        model: hub id or local folder (sentence-transformers, PyLate/Stanford ColBERT or plain
            transformers layout).
        task: the primary task; checked against what the model supports (auto when omitted).
        dtype: ``auto`` (bf16/fp16 on CUDA, fp32 on CPU), or an explicit dtype.
        device: ``cuda``, ``cpu``, ... (auto when omitted).
        max_model_len: token limit per input (defaults to the model's own).
        pooler_config: overrides of the folder's pooling defaults (vLLM's keys), as a dict, a
            ``PoolerConfig`` or JSON text; ``enable_chunked_processing`` / ``max_embed_len`` embed
            inputs longer than ``max_model_len`` in chunks.
        hf_overrides: attributes set on the transformers config, e.g. ``{"is_matryoshka": True}``.
        trust_remote_code: allow model folders that ship their own modeling code.
        max_batch_tokens: token budget of one forward pass; by default 16384 on CUDA and 4096 on
            CPUs, where smaller batches stay in cache (1.1-1.3x on all-MiniLM-L6-v2, RESULTS.md). One
            below ``max_model_len`` is raised to it, with a warning (``max_model_len`` cuts inputs).
        max_batch_size: most sequences in one forward pass (vLLM's ``max_num_seqs``; default 512).
        revision / tokenizer / tokenizer_revision: the model's hub revision, another tokenizer (a
            folder or hub id) and its revision.
        download_dir / hf_token: vLLM's names of the hub cache folder and access token (``True``: the
            one ``hf auth login`` saved); unset, huggingface_hub's own (``$HF_HOME``, ``$HF_TOKEN``).
        convert: adapt a ``*ForCausalLM`` checkpoint: ``embed`` (LAST-token vectors), ``classify``
            (scores from the lm_head rows of ``hf_overrides["classifier_from_token"]``) or
            ``reward`` (process reward model, with a STEP ``pooler_config``). ``embed`` pools the
            backbone of any other checkpoint too; ``classify`` / ``reward`` on a checkpoint that
            already is a classifier / reward model change nothing (as vLLM's ``--convert``).
        score_template: prompt for (query, document) pairs of LLM rerankers: a shipped name
            (``qwen3_reranker``, ``bge_reranker_v2_gemma``, ``mxbai_rerank_v2``), a .jinja path or Jinja text.
        device_map: accelerate placement (``"auto"``, a dict) for models larger than one device.
        quantization: ``"int8"`` weight-only quantization (torchao), or ``"fp8"`` float8 weights (CUDA only).
        cpu_fast_mode: opt-in faster CPU inference, ``"bf16"`` (pays off on CPUs with AMX), ``"int8"``,
            or ``"auto"``: both timed against the exact path on this machine, the faster one that
            meets the cosine bar used (exact fp32 when neither is faster; cached with the tune verdict)
            (SmoothQuant attention matmuls on native encoders, dynamic quantisation elsewhere); its
            cosine to fp32 on probe texts is measured at load, logged and kept in
            ``engine.fast_mode_report``. Below ``cpu_fast_mode_min_cosine`` the engine keeps exact
            fp32 (the report says why), since the arithmetic differs by CPU. The default is exact fp32.
        cpu_fast_mode_min_cosine: the accuracy bar of ``cpu_fast_mode`` (min cosine to fp32 on the
            probe texts; default 0.999).
        compile: ``"background"`` compiles the forward pass with inductor on a background thread
            while the engine serves eagerly, loads an earlier run's compiled code from poolrag's
            cache dir when there is one, and swaps the compiled forward in between batches once
            its outputs match eager on the probe texts (per-row cosine ≥ 0.99999; with a fast mode
            on, whatever keeps the mode's bar to fp32, see
            :meth:`~poolrag.loading.cpu_fast_mode.FastModeReport.compiled_min_cosine`); what happened
            is in ``engine.compile_report``. With ``cpu_fast_mode="int8"`` on a native encoder it
            fuses the per-token quantisation around oneDNN's int8 matmuls (1.1-1.2x eager int8).
            ``"off"``: never. ``None`` (default): only where the tune verdict chose a compiled path
            (``poolrag tune``), whose compiled code is then on disk; a fresh compile on a 2-core CPU
            competes with the first requests (RESULTS.md).
        model_impl: ``"auto"`` runs BERT / RoBERTa / XLM-RoBERTa on poolrag's own packed, fused
            implementation where it is exact and everything else through transformers;
            ``"native"`` requires the former, ``"transformers"`` forces the latter.
        tune: ``"auto"`` (default, or ``$POOLRAG_TUNE``): at the model's first load on this machine
            the exact paths left open by ``model_impl`` / ``compile`` are timed on the model's own
            shapes and the fastest whose outputs match the reference (cosine ≥ 0.99999) serves;
            the verdict is cached on disk, so later loads build only the chosen path. Without a
            ``cpu_fast_mode`` or a pinned ``compile`` that timing runs in the background between
            batches while the default path serves, which switches to the winner when the verdict
            is in (``engine.wait_for_tune()``). ``"full"``
            measures again now, compiled candidates included (what ``poolrag tune`` runs);
            ``"cached"`` uses a verdict on disk and measures nothing (a short script's choice);
            ``"off"`` loads as ``model_impl`` says, untimed. What happened is ``engine.tune_report``.
        truncate: an input over ``max_model_len`` keeps its first tokens (default, as
            sentence-transformers, TEI and Cohere do; ``engine.core_stats.truncated_inputs`` counts
            them), or with ``False`` raises :class:`~poolrag.InputTooLongError`; a call's
            ``PoolingParams(truncate=..., truncate_prompt_tokens=...)`` overrides it.
    """

    def __init__(
        self,
        model: str | os.PathLike[str],
        *,
        task: str | None = None,
        dtype: DTypeName | torch.dtype = "auto",
        device: str | torch.device | None = None,
        max_model_len: int | None = None,
        pooler_config: PoolerConfig | dict[str, Any] | str | None = None,
        hf_overrides: dict[str, Any] | None = None,
        trust_remote_code: bool = False,
        max_batch_tokens: int | None = None,
        max_batch_size: int | None = None,
        revision: str | None = None,
        tokenizer: str | None = None,
        tokenizer_revision: str | None = None,
        download_dir: str | None = None,
        hf_token: str | bool | None = None,
        convert: Convert | None = None,
        score_template: str | ScoreTemplate | None = None,
        device_map: str | dict[str, Any] | None = None,
        quantization: Quantization | None = None,
        cpu_fast_mode: CpuFastMode | None = None,
        cpu_fast_mode_min_cosine: float | None = None,
        model_impl: ModelImpl = "auto",
        compile: CompileMode | None = None,
        tune: TuneMode | None = None,
        truncate: bool = True,
    ) -> None:
        # every option checked once, by the rule every door uses; the engine reads only this value
        given = {name: value for name, value in locals().items() if name in ENGINE_OPTIONS}
        self._build(EngineArgs(model, **given))

    def _build(self, args: EngineArgs) -> None:
        """Resolve the model, build its pipeline, keep its facts (:mod:`poolrag.core.engine_build`);
        then start what runs beside serving (a background compile, a first load's timing)."""
        self.engine_args = args  # a pickled engine is loaded again from this value (__reduce__)
        built = build_engine(args)
        self.model_name, self.spec, self._score_template = args.model, built.spec, built.score_template
        self.device, self.dtype = built.device, built.dtype
        self._pipeline: Pipeline = built.pipeline
        # dropping the engine closes it, as close() does: the executor's own finalizer waits for the
        # executor, which a background measurement holds (its pipeline) until it ends, so a dropped
        # engine kept its threads and model while its measuring went on
        weakref.finalize(self, self._pipeline.executor.close)
        self._facts, self.task = built.facts, built.task
        self._pooler_defaults = self._pipeline.pooler_defaults
        self._tune_report, self._tune = built.tuned.report, built.tuned.background
        self.fast_mode_report: FastModeReport | None = built.fast_mode_report
        self._compile: BackgroundCompile | None = built.tuned.compile_job
        if args.compile == "background" or built.tuned.plan.compile:
            self._start_compile()
        if self._tune is not None:  # a first load: the default path serves while the others are timed
            self._tune.start()
        self._loaded_in = os.getpid()
        _LOADED[(self._facts.model_identity, repr(args))] = self

    def __reduce__(self) -> tuple[Any, ...]:
        """An engine pickles as the arguments that made it: unpickling loads the model again, as a
        worker process needs (a multiprocessing pool, LlamaIndex's ``IngestionPipeline(num_workers=)``),
        unless a forked worker already holds this engine (:func:`_load_engine`); the tune verdict on
        disk makes a load as quick as a second one here."""
        return _load_engine, (type(self), self.engine_args, self._facts.model_identity)

    @property
    def closed(self) -> bool:
        """Whether the engine no longer takes work: closed, or its scheduler stopped on a fault
        (a server's ``/health`` answers 503 then)."""
        return self._pipeline.executor.core.closed

    def close(self) -> None:
        """Stop the engine's threads now; queued and later calls raise
        :class:`~poolrag.EngineClosedError`. Dropping the last reference does the same, but a kept
        traceback (a notebook's last error) can hold one for long. A background compile already
        running finishes on its own thread."""
        self._pipeline.executor.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __copy__(self) -> Engine:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Engine:
        """Shared, not copied: an engine holds nothing a caller changes, and a copy of a model's
        weights would only cost memory (a framework deep-copying its settings keeps working)."""
        return self

    @classmethod
    def from_engine_args(cls, args: EngineArgs) -> Engine:
        """The engine an :class:`~poolrag.EngineArgs` describes (checked when it was made)."""
        engine = cls.__new__(cls)
        engine._build(args)
        return engine

    def _start_compile(self) -> None:
        from poolrag.compile.background import BackgroundCompile, compile_bar

        runner = self._pipeline.executor.runner
        # the compiled graph reads the packed weights (the first batch would pack them anyway)
        runner.prepare_for_serving()
        probe = probe_requests(self._pipeline.processor)
        bar = compile_bar(self.fast_mode_report)
        self._compile = BackgroundCompile(runner, probe, self._facts.model_identity, bar).start()

    @property
    def compile_report(self) -> CompileReport | None:
        """What ``compile="background"`` did so far (None when compile is off)."""
        return None if self._compile is None else self._compile.report

    def wait_for_compile(self, timeout: float | None = None) -> CompileReport | None:
        """Block until the background compile has ended (or ``timeout``); its report."""
        return None if self._compile is None else self._compile.wait(timeout)

    @property
    def tune_report(self) -> TuneReport:
        """What autotuning did at this load (``measuring`` while a first load times the paths)."""
        return self._tune_report if self._tune is None else self._tune.report

    def wait_for_tune(self, timeout: float | None = None) -> TuneReport:
        """Block until a background measurement has ended (or ``timeout``); the tune report."""
        return self._tune_report if self._tune is None else self._tune.wait(timeout)

    # -- what the model is ------------------------------------------------------------------------
    @property
    def supported_tasks(self) -> tuple[PoolingTask, ...]:
        """The pooling tasks this model runs; a call for another raises
        :class:`~poolrag.UnsupportedTaskError`."""
        return self._pipeline.supported_tasks

    @property
    def max_model_len(self) -> int:
        """Most tokens one input may have (the folder's, or ``max_model_len=``); a longer one is cut
        to it or refused, as ``truncate`` says."""
        return self._pipeline.max_model_len

    @property
    def embedding_dim(self) -> int | None:
        """Size of ``embed`` (or ColBERT token) vectors before any Matryoshka truncation."""
        return self._pipeline.embedding_dim

    @property
    def tokenizer(self) -> Any:
        """The model's transformers tokenizer (what :meth:`tokenize` calls)."""
        return self._pipeline.tokenizer

    @property
    def model_folder(self) -> Path:
        """The local folder the model was read from (a hub id's snapshot): its shipped files, such
        as quantization ranges, sit there."""
        return self.spec.path

    @property
    def id2label(self) -> dict[int, str]:
        """A classifier's label names by output column (the columns of ``classify``'s ``probs``)."""
        return self.spec.id2label

    @property
    def classify_activation(self) -> str:
        """What ``classify`` and ``score`` apply to a classifier's logits (``softmax``, ``sigmoid``,
        ``tanh`` or ``identity``): the folder's own, or the default for its label count."""
        return self._pipeline.classify_activation

    @property
    def is_matryoshka(self) -> bool:
        """Whether ``PoolingParams(dimensions=...)`` may shorten this model's vectors."""
        return self.spec.is_matryoshka

    @property
    def model_identity(self) -> str:
        """Stable identity of name + weights, for content-addressed caches."""
        return self._facts.model_identity

    @property
    def core_stats(self) -> CoreStats:
        """Live counters of the engine core (forward batches, sequences, tokens), for metrics."""
        return self._pipeline.executor.core.stats

    @property
    def pooler_config(self) -> PoolerConfig:
        """The resolved pooling defaults (folder + caller overrides); their digest is
        ``facts.output_fingerprint``, which caches key on with the weights' identity."""
        return self._pipeline.pooler_config

    @property
    def pooler_task(self) -> str | None:
        """The task the pooler config names (vLLM's ``PoolerConfig.task``): what ``score``
        computes follows it, and ``/pooling`` runs it for a request naming none."""
        return self._pipeline.pooler_config.task

    @property
    def supports_late_chunking(self) -> bool:
        """Whether :meth:`embed_chunks` can run: a mean-pooling ``embed`` head (a CLS or last-token
        vector has no part per chunk), as the pipeline built it."""
        return LATE_CHUNK_TASK in self._pipeline.executor.poolers

    @property
    def late_chunking_refusal(self) -> str | None:
        """Why :meth:`embed_chunks` cannot run on this model (``None`` where it can)."""
        if self.supports_late_chunking:
            return None
        return late_chunking_refused(self.pooler_config.pooling_type, self._facts)

    @property
    def score_kind(self) -> ScoreKind:
        """How ``score`` works for this model: a cross-encoder, cosine of vectors or MaxSim."""
        return self._pipeline.score_kind

    @property
    def document_prompt(self) -> str:
        """The instruction the model reads before each document (``""`` for none), which a
        chunk sized to the model's length must leave room for."""
        return self._pipeline.processor.prompts.prefix_for("document", None)

    @property
    def facts(self) -> ModelFacts:
        """What callers may know about the model (the :class:`~poolrag.backend.PoolingBackend` facts)."""
        return self._facts

    @property
    def max_batch_tokens(self) -> int:
        """Token budget of one forward pass (what a caller sizes its batches of inputs to)."""
        return int(self._pipeline.executor.batcher.max_batch_tokens)

    @property
    def text_token_cap(self) -> int | None:
        """The most tokens one text puts in flight: :attr:`max_model_len`, or ``None`` where the
        pooler config embeds long inputs whole, in chunks."""
        return None if self._pipeline.processor.chunked else self.max_model_len

    def frame_token_ids(self, ids: Sequence[int], input_type: str | None = None) -> list[int] | None:
        """The model input the text path makes of a text whose bare token ids are ``ids``.

        Lets a caller that tokenised a text already (the ingest chunker) send it as a token prompt
        and skip a second tokenisation. ``None`` where that would not be the same model input (an
        instruction prompt for ``input_type``, ColBERT markers, special tokens that vary).
        """
        return self._pipeline.processor.frame_ids(ids, input_type)

    # -- parameter resolution -----------------------------------------------------------------------
    def _resolve(self, task: str, params: PoolingParams | None) -> ResolvedParams:
        return (params or PoolingParams()).verify(task, self._facts, self._pooler_defaults)

    def _resolve_multi(self, params: PoolingParams | None) -> ResolvedParams:
        """One request for the dense, sparse and ColBERT vectors of a three-head model: each part
        is checked as its own task would be, the dense one carries ``embed``'s settings."""
        params = params or PoolingParams()
        if MULTI_VECTOR_TASK not in self._pipeline.executor.poolers:  # one pass, three vectors
            raise UnsupportedTaskError("encode_multi", self.supported_tasks)
        dense = self._resolve("embed", params.with_updates(max_active_dims=None))
        # the sparse part has no size and no normalisation: those settings are the dense part's
        self._resolve(
            "sparse_embed", params.with_updates(dimensions=None, normalize=None, use_activation=None)
        )
        return ResolvedParams(
            task=MULTI_VECTOR_TASK,
            dimensions=dense.dimensions,
            normalize=dense.normalize,
            input_type=params.input_type,
            max_active_dims=params.max_active_dims,
        )

    def _token_limit(self, params: PoolingParams, task: str) -> int | None:
        """The long-input rule (:meth:`PoolingParams.token_limit`) with this engine's ``truncate``
        as its default; a model whose pooler config chunks long embed inputs chunks them instead."""
        chunks = task == "embed" and self._pipeline.processor.chunked
        return params.token_limit(self.engine_args.truncate and not chunks)

    def _requests(
        self, prompts: Prompts, task: str, params: PoolingParams | None, pending_images: bool = False
    ) -> list[PoolingRequest]:
        items = prompt_list(prompts)
        resolved = self._resolve_multi(params) if task == MULTI_VECTOR_TASK else self._resolve(task, params)
        p = params or PoolingParams()
        processor = self._pipeline.processor
        prompt = processor.prompts.chosen(p.prompt, p.prompt_name)
        one = isinstance(prompts, (str, Mapping))  # named "input", not "input[0]"
        limit = self._token_limit(p, task)
        return processor.texts(items, resolved, limit, prompt, one=one, pending_images=pending_images)

    # -- running: one body per task, driven synchronously or from asyncio ------------------------------
    def _drive(self, steps: Steps[T]) -> T:
        """Run a task's steps with the blocking executor (thread-safe: the core batches threads)."""
        try:
            requests = next(steps)
            executor = self._pipeline.executor
            run = executor.execute_as_ready if _pending(requests) else executor.execute
            steps.send(run(requests))
        except StopIteration as done:
            return done.value
        raise RuntimeError("a task plan asked for more than one round of results")

    async def _adrive(self, steps: Steps[T], *inputs: object) -> T:
        """Run a task's steps without blocking the event loop: ``inputs`` (the call's texts or
        prompts) are tokenised on the engine's own threads unless small (:func:`_inline`)."""

        def first() -> tuple[bool, Any]:
            try:
                return False, next(steps)
            except StopIteration as done:
                return True, done.value

        # a tokenizer busy on another thread (a big request, an ingest's chunker) would make the
        # event loop wait for its lock: then this one goes to a thread as well
        threaded = not _inline(inputs) or tokenizer_lock(self.tokenizer).locked()
        executor = self._pipeline.executor
        finished, value = await executor.off_loop(first) if threaded else first()
        if finished:
            return value
        # images still being prepared are waited for on a thread, not the loop
        run = executor.aexecute_as_ready if _pending(value) else executor.aexecute
        try:
            steps.send(await run(value))
        except StopIteration as done:
            return done.value
        raise RuntimeError("a task plan asked for more than one round of results")

    # -- tasks ----------------------------------------------------------------------------------------
    def encode(
        self,
        prompts: Prompts,
        pooling_task: PoolingTask = "embed",
        pooling_params: PoolingParams | None = None,
    ) -> list[PoolingRequestOutput[PoolingOutput]]:
        """Any task's raw pooled data (a vector, a per-token matrix, per-step rewards)."""
        return self._drive(self._output_steps(prompts, pooling_task, pooling_params, PoolingOutput))

    async def aencode(
        self,
        prompts: Prompts,
        pooling_task: PoolingTask = "embed",
        pooling_params: PoolingParams | None = None,
    ) -> list[PoolingRequestOutput[PoolingOutput]]:
        """:meth:`encode` for asyncio: batched with every other caller of this engine."""
        return await self._adrive(
            self._output_steps(prompts, pooling_task, pooling_params, PoolingOutput), prompts
        )

    def _output_steps(
        self,
        prompts: Prompts,
        task: str,
        pooling_params: PoolingParams | None,
        wrap: Callable[[np.ndarray], Out],
    ) -> Steps[list[PoolingRequestOutput[Out]]]:
        """The one body of every per-input task: tokenise, yield to the core, wrap each result (a
        call's images go to the model as they are prepared, the list filled in as they are)."""
        requests = self._requests(prompts, task, pooling_params, pending_images=True)
        results = yield requests
        texts = [p if isinstance(p, str) else None for p in prompt_list(prompts)]
        return [
            PoolingRequestOutput(
                str(i),
                wrap(data),
                list(req.token_ids),
                texts[i],
                req.truncated,
                image_tokens=req.pixels.patches if req.pixels is not None else 0,
            )
            for i, (req, data) in enumerate(zip(requests, results, strict=True))
        ]

    def embed(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> list[PoolingRequestOutput[EmbeddingOutput]]:
        """One vector per prompt (``outputs.embedding``, float32, :attr:`embedding_dim` values or
        ``dimensions``), as sentence-transformers' ``encode`` gives it: normalised where the folder
        normalises, unless ``pooling_params`` says otherwise."""
        return self._drive(self._output_steps(prompts, "embed", pooling_params, EmbeddingOutput))

    async def aembed(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> list[PoolingRequestOutput[EmbeddingOutput]]:
        """:meth:`embed` for asyncio: batched with every other caller of this engine."""
        return await self._adrive(
            self._output_steps(prompts, "embed", pooling_params, EmbeddingOutput), prompts
        )

    def embed_array(self, prompts: Prompts, pooling_params: PoolingParams | None = None) -> np.ndarray:
        """All embeddings as one ``[N, D]`` float32 array, without per-item Python objects."""
        return self._drive(self._embed_array_steps(prompts, pooling_params))

    async def aembed_array(self, prompts: Prompts, pooling_params: PoolingParams | None = None) -> np.ndarray:
        """:meth:`embed_array` for asyncio: batched with every other caller of this engine."""
        return await self._adrive(self._embed_array_steps(prompts, pooling_params), prompts)

    def _embed_array_steps(self, prompts: Prompts, pooling_params: PoolingParams | None) -> Steps[np.ndarray]:
        requests = self._requests(prompts, "embed", pooling_params, pending_images=True)
        if not requests:
            dims = self._resolve("embed", pooling_params).dimensions or self.embedding_dim or 0
            return np.zeros((0, dims), dtype=np.float32)
        return np.stack((yield requests))

    def embed_chunks(
        self,
        document: str,
        spans: Sequence[tuple[int, int]],
        pooling_params: PoolingParams | None = None,
    ) -> np.ndarray:
        """Late chunking: ``[len(spans), D]`` vectors, one per ``[start, end)`` character span of
        ``document``, each the mean of its token rows from ONE forward pass over the whole document
        (windows of the model's length beyond it, see :mod:`poolrag.tokenization.late_chunks`), so
        each chunk's vector has read its context. Then the ``embed`` head (projection, ``dimensions``,
        normalisation). Mean-pooling models only.
        """
        return self._drive(self._late_chunk_steps(document, spans, pooling_params))

    async def aembed_chunks(
        self,
        document: str,
        spans: Sequence[tuple[int, int]],
        pooling_params: PoolingParams | None = None,
    ) -> np.ndarray:
        """:meth:`embed_chunks` for asyncio: batched with every other caller of this engine."""
        return await self._adrive(self._late_chunk_steps(document, spans, pooling_params), document, spans)

    def _late_chunk_steps(
        self, document: str, spans: Sequence[tuple[int, int]], pooling_params: PoolingParams | None
    ) -> Steps[np.ndarray]:
        params = pooling_params or PoolingParams()
        resolved = replace(self._resolve("embed", params), task=LATE_CHUNK_TASK)
        if (refusal := self.late_chunking_refusal) is not None:
            raise InvalidInputError(refusal)
        if params.truncate_prompt_tokens is not None:  # said, not ignored: no token is ever cut here
            raise InvalidInputError(
                "late chunking reads the whole document (in windows past the model's length); "
                "truncate_prompt_tokens does not apply to it",
                param="truncate_prompt_tokens",
            )
        (document,) = checked_texts([document], "document", one=True)
        checked = check_spans(document, spans)
        processor = self._pipeline.processor
        prompt = processor.prompts.chosen(params.prompt, params.prompt_name)
        prefix = processor.prompts.prefix_for(resolved.input_type, prompt)
        plan = plan_late_chunks(processor, document, checked, resolved, prefix)
        results = yield plan.windows
        return np.stack([results[window][row] for window, row in plan.placement])

    def sparse_embed(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> list[SparseVector]:
        """Token id → weight vectors (SPLADE, BGE-M3's sparse head) for hybrid search.

        ``pooling_params.max_active_dims`` keeps only the largest weights of each text.
        """
        return self._drive(self._sparse_steps(prompts, pooling_params))

    async def asparse_embed(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> list[SparseVector]:
        """:meth:`sparse_embed` for asyncio: batched with every other caller of this engine."""
        return await self._adrive(self._sparse_steps(prompts, pooling_params), prompts)

    def _sparse_steps(
        self, prompts: Prompts, pooling_params: PoolingParams | None
    ) -> Steps[list[SparseVector]]:
        return [_sparse_vector(e) for e in (yield self._requests(prompts, "sparse_embed", pooling_params))]

    def encode_multi(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> list[MultiVector]:
        """Dense, sparse and ColBERT vectors of each text from ONE forward pass (BGE-M3-style models).

        Equal to :meth:`embed`, :meth:`sparse_embed` and ``encode(..., "token_embed")`` with the
        same parameters, for a third of their cost.
        """
        return self._drive(self._multi_steps(prompts, pooling_params))

    async def aencode_multi(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> list[MultiVector]:
        """:meth:`encode_multi` for asyncio: batched with every other caller of this engine."""
        return await self._adrive(self._multi_steps(prompts, pooling_params), prompts)

    def _multi_steps(
        self, prompts: Prompts, pooling_params: PoolingParams | None
    ) -> Steps[list[MultiVector]]:
        return [
            MultiVector(dense=parts[0], sparse=_sparse_vector(parts[1]), colbert=parts[2])
            for parts in (yield self._requests(prompts, MULTI_VECTOR_TASK, pooling_params))
        ]

    def classify(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> list[PoolingRequestOutput[ClassificationOutput]]:
        """Each prompt's label scores (``outputs.probs``, one per :attr:`id2label` column) after
        :attr:`classify_activation`; ``PoolingParams(use_activation=False)`` gives the logits."""
        return self._drive(self._output_steps(prompts, "classify", pooling_params, ClassificationOutput))

    async def aclassify(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> list[PoolingRequestOutput[ClassificationOutput]]:
        """:meth:`classify` for asyncio: batched with every other caller of this engine."""
        return await self._adrive(
            self._output_steps(prompts, "classify", pooling_params, ClassificationOutput), prompts
        )

    def classify_pairs(
        self,
        text_1: str | Sequence[str],
        text_2: str | Sequence[str],
        pooling_params: PoolingParams | None = None,
    ) -> list[PoolingRequestOutput[ClassificationOutput]]:
        """Every label's score for each (``text_1``, ``text_2``) pair read jointly, paired 1:1,
        1:N or N:N as :meth:`score` pairs them: what ``CrossEncoder.predict`` gives for an NLI
        model's pairs (entailment, neutral, contradiction), where :meth:`score` wants one label.
        As ``predict``, the activation is the one a CrossEncoder saved in the folder, else a
        sigmoid for one label and the logits for several (``classify`` takes vLLM's softmax
        there); a ``pooler_config`` activation wins, and ``use_activation=False`` gives the logits."""
        return self._drive(self._pair_classify_steps(text_1, text_2, pooling_params))

    async def aclassify_pairs(
        self,
        text_1: str | Sequence[str],
        text_2: str | Sequence[str],
        pooling_params: PoolingParams | None = None,
    ) -> list[PoolingRequestOutput[ClassificationOutput]]:
        """:meth:`classify_pairs` for asyncio: batched with every other caller of this engine."""
        return await self._adrive(self._pair_classify_steps(text_1, text_2, pooling_params), text_1, text_2)

    def _pair_classify_steps(
        self, text_1: str | Sequence[str], text_2: str | Sequence[str], pooling_params: PoolingParams | None
    ) -> Steps[list[PoolingRequestOutput[ClassificationOutput]]]:
        # every model kind that classifies reads a pair jointly (its score kind is cross-encoder)
        pairs = self._pipeline.processor.checked_pairs(text_1, text_2)
        params = pooling_params or PoolingParams()
        activation = self._pipeline.pair_activation
        if activation == self.classify_activation or not self._resolve("classify", params).use_activation:
            steps = self._joint_pair_steps(pairs, "classify", params, None, ClassificationOutput)
        else:  # CrossEncoder.predict's activation, not classify's: the head's logits, activated here

            def predicted(logits: np.ndarray) -> ClassificationOutput:
                return ClassificationOutput(to_numpy(activate(torch.from_numpy(logits), activation)))

            raw = params.with_updates(use_activation=False)
            steps = self._joint_pair_steps(pairs, "classify", raw, None, predicted)
        return (yield from steps)

    def _joint_pair_steps(
        self,
        pairs: list[tuple[str, str]],
        task: str,
        params: PoolingParams,
        template: ScoreTemplate | None,
        answer: Callable[[np.ndarray], T],
    ) -> Steps[list[PoolingRequestOutput[T]]]:
        """One request per pair read jointly (a cross-encoder's input), answered by ``answer``: the
        one path :meth:`score` and :meth:`classify_pairs` share, so both tokenise and cut alike."""
        resolved = self._resolve(task, params)
        truncate = self._token_limit(params, task)
        processor = self._pipeline.processor
        if template is None:
            requests = processor.pairs(pairs, resolved, truncate)
        else:
            requests = templated_pair_requests(
                self.tokenizer, template, pairs, resolved, self.max_model_len, truncate, processor.text_cut
            )
        results = yield requests
        return [
            PoolingRequestOutput(str(i), answer(r), list(req.token_ids), truncated=req.truncated)
            for i, (req, r) in enumerate(zip(requests, results, strict=True))
        ]

    def reward(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> list[PoolingRequestOutput[PoolingOutput]]:
        """One score per text for a sequence reward model; per-step scores for a process reward model."""
        return self.encode(prompts, "reward", pooling_params)

    async def areward(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> list[PoolingRequestOutput[PoolingOutput]]:
        """:meth:`reward` for asyncio."""
        return await self.aencode(prompts, "reward", pooling_params)

    def token_classify(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> list[PoolingRequestOutput[PoolingOutput]]:
        """Each prompt's per-token label scores (``outputs.data``, ``[tokens, labels]``, softmax
        unless ``use_activation=False``), as vLLM's ``token_classify``; :meth:`extract_entities`
        groups them into entity spans."""
        return self.encode(prompts, "token_classify", pooling_params)

    async def atoken_classify(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> list[PoolingRequestOutput[PoolingOutput]]:
        """:meth:`token_classify` for asyncio."""
        return await self.aencode(prompts, "token_classify", pooling_params)

    def extract_entities(self, texts: str | Sequence[str], min_score: float = 0.0) -> list[list[Entity]]:
        """Named entities with character offsets, from a BIO token-classification model: its tokens'
        softmax grouped as transformers' pipeline groups them (:func:`group_entities`). One list per
        text (a list of one for a single text); entities scored below ``min_score`` are left out."""
        items = checked_texts(
            [texts] if isinstance(texts, str) else list(texts), "input", isinstance(texts, str)
        )
        if not items:
            return []
        PoolingParams().verify("token_classify", self._facts)  # refused before tokenising
        # this engine's long-input rule: cut at the model's length, or (truncate=False) left whole
        # for token_classify to refuse, naming the input
        cut = self.engine_args.truncate
        encoded = call_tokenizer(
            self.tokenizer,
            items,
            return_offsets_mapping=True,
            return_special_tokens_mask=True,
            truncation=cut,
            max_length=self.max_model_len if cut else None,
        )
        prompts = [{"prompt_token_ids": ids} for ids in encoded["input_ids"]]
        # the pipeline's softmax, whatever problem_type gives token_classify (vLLM's activation)
        outputs = self.token_classify(prompts, PoolingParams(use_activation=False))
        probs = [to_numpy(activate(torch.from_numpy(out.outputs.data), "softmax")) for out in outputs]
        return [
            group_entities(text, offsets, rows, self.id2label, min_score, special)
            for text, offsets, special, rows in zip(
                items, encoded["offset_mapping"], encoded["special_tokens_mask"], probs, strict=True
            )
        ]

    def score(
        self,
        text_1: ScoreSide,
        text_2: ScoreSide,
        pooling_params: PoolingParams | None = None,
        score_template: str | ScoreTemplate | None = None,
        template_variables: Mapping[str, Any] | None = None,
    ) -> list[PoolingRequestOutput[ScoringOutput]]:
        """Relevance of ``text_2`` items to ``text_1``: 1:1, 1:N (one query) or N:N (zipped pairs).

        Cross-encoders read each pair jointly; embedding models use cosine; ColBERT models MaxSim.
        ``score_template`` (or the engine's) formats each pair into one prompt for LLM rerankers;
        ``template_variables`` (vLLM's ``chat_template_kwargs``, e.g. an ``instruction``) fill it
        for this call, and are refused where no template formats the pairs.
        """
        return self._drive(
            self._score_steps(text_1, text_2, pooling_params, score_template, template_variables)
        )

    async def ascore(
        self,
        text_1: ScoreSide,
        text_2: ScoreSide,
        pooling_params: PoolingParams | None = None,
        score_template: str | ScoreTemplate | None = None,
        template_variables: Mapping[str, Any] | None = None,
    ) -> list[PoolingRequestOutput[ScoringOutput]]:
        """:meth:`score` for asyncio: batched with every other caller of this engine."""
        steps = self._score_steps(text_1, text_2, pooling_params, score_template, template_variables)
        return await self._adrive(steps, text_1, text_2)

    def _score_steps(
        self,
        text_1: ScoreSide,
        text_2: ScoreSide,
        pooling_params: PoolingParams | None,
        score_template: str | ScoreTemplate | None,
        template_variables: Mapping[str, Any] | None = None,
    ) -> Steps[list[PoolingRequestOutput[ScoringOutput]]]:
        template = load_score_template(score_template) if score_template is not None else self._score_template
        params = pooling_params or PoolingParams()
        cross_encoder = self.score_kind is ScoreKind.CROSS_ENCODER
        if template_variables:
            if template is None or not cross_encoder:
                raise InvalidInputError(
                    "template variables (vLLM's instruction / chat_template_kwargs) fill a score template, "
                    "an LLM reranker's; this model scores pairs without one",
                    param="chat_template_kwargs",
                )
            template = template.with_variables(**template_variables)
        if cross_encoder:
            return (yield from self._cross_encoder_score_steps(text_1, text_2, params, template))
        if score_template is not None:
            raise InvalidInputError(
                "score templates format pairs for cross-encoders; this model scores by similarity"
            )
        return (yield from self._similarity_score_steps(text_1, text_2, params))

    def _cross_encoder_score_steps(
        self, text_1: ScoreSide, text_2: ScoreSide, params: PoolingParams, template: ScoreTemplate | None
    ) -> Steps[list[PoolingRequestOutput[ScoringOutput]]]:
        """Each pair read jointly (through ``template`` where given), its one logit the score."""
        pairs = self._pipeline.processor.checked_pairs(text_1, text_2)
        if not pairs:
            return []
        if self.spec.num_labels != 1:
            raise UnsupportedTaskError("score", self.supported_tasks)
        return (yield from self._joint_pair_steps(pairs, "score", params, template, _one_label_score))

    def _similarity_score_steps(
        self, text_1: ScoreSide, text_2: ScoreSide, params: PoolingParams
    ) -> Steps[list[PoolingRequestOutput[ScoringOutput]]]:
        """Each side embedded (cosine model) or token-embedded (ColBERT), each pair's similarity the score."""
        firsts, seconds = score_pairs(text_1, text_2)
        if not seconds:
            return []
        kind = self.score_kind
        task = "embed" if kind is ScoreKind.COSINE else "token_embed"
        # Verified twice, as two tasks: "score" holds the caller's params to what a score takes
        # (no dimensions, no activation, text_1's role), the embedding task fills what the vectors
        # are computed with (the model's normalisation); the document side differs only in its role.
        params.verify("score", self._facts)
        # As vLLM scores an embedder: each text embedded as embed() embeds it, so a query the caller
        # wrote its instruction into does not get the folder's prompt twice. input_type="query" asks
        # for the roles (the folder's query prompt on text_1, its document prompt on text_2), as
        # sentence-transformers' encode_query / encode_document; ColBERT's markers are its roles always.
        roles = kind is not ScoreKind.COSINE or params.input_type == "query"
        query_params = self._resolve(task, params.with_updates(input_type="query" if roles else None))
        doc_params = replace(query_params, input_type="document" if roles else None)
        processor = self._pipeline.processor
        prompt = processor.prompts.chosen(params.prompt, params.prompt_name)
        truncate = self._token_limit(params, task)
        q_requests = processor.texts(
            firsts, query_params, truncate, prompt, "text_1", isinstance(text_1, str)
        )
        d_requests = processor.texts(seconds, doc_params, truncate, None, "text_2", isinstance(text_2, str))
        q_requests = q_requests * len(d_requests) if len(q_requests) == 1 else q_requests  # 1:N
        results = yield q_requests + d_requests
        sim = similarity_by_name(self.spec.similarity) if kind is ScoreKind.COSINE else maxsim
        n = len(q_requests)
        return [
            PoolingRequestOutput(
                str(i),
                ScoringOutput(sim(results[i], results[n + i])),
                list(q_requests[i].token_ids) + list(d_requests[i].token_ids),
                truncated=q_requests[i].truncated or d_requests[i].truncated,
            )
            for i in range(n)
        ]

    # -- the PoolingBackend arrays ----------------------------------------------------------------------
    def score_array(
        self, text_1: ScoreInput, text_2: Sequence[ScoreInput], pooling_params: PoolingParams | None = None
    ) -> np.ndarray:
        """Scores of each ``text_2`` item against the query ``text_1`` as one float64 array."""
        return _scores(self.score(text_1, item_list(text_2, "text_2"), pooling_params))

    async def ascore_array(
        self, text_1: ScoreInput, text_2: Sequence[ScoreInput], pooling_params: PoolingParams | None = None
    ) -> np.ndarray:
        """:meth:`score_array` for asyncio: batched with every other caller of this engine."""
        return _scores(await self.ascore(text_1, item_list(text_2, "text_2"), pooling_params))

    def encode_arrays(
        self,
        prompts: Prompts,
        pooling_task: PoolingTask = "embed",
        pooling_params: PoolingParams | None = None,
    ) -> list[np.ndarray]:
        """Each prompt's pooled data alone (a vector, or a per-token matrix for ``token_embed``)."""
        return [out.outputs.data for out in self.encode(prompts, pooling_task, pooling_params)]

    async def aencode_arrays(
        self,
        prompts: Prompts,
        pooling_task: PoolingTask = "embed",
        pooling_params: PoolingParams | None = None,
    ) -> list[np.ndarray]:
        """:meth:`encode_arrays` for asyncio: batched with every other caller of this engine."""
        return [out.outputs.data for out in await self.aencode(prompts, pooling_task, pooling_params)]

    def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """The token ids the model reads for ``text`` (with its special tokens unless told otherwise)."""
        return list(
            call_tokenizer(
                self.tokenizer,
                *checked_texts([text], "input", one=True),
                add_special_tokens=add_special_tokens,
            )["input_ids"]
        )


def _pending(requests: Sequence[object]) -> bool:
    """Some of ``requests`` are images still being prepared (futures of the image pool)."""
    return any(isinstance(r, Future) for r in requests)
