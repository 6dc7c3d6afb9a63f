"""The interfaces every consumer of a pooling model depends on, narrowest first.

:class:`PoolingBackend` (arrays only) is implemented by :class:`~poolrag.Engine` (in process),
:class:`~poolrag.client.PoolragClient` (``poolrag serve`` over HTTP) and the cache's read-through
wrapper; the cache, retrieval and the framework adapters take it and nothing more specific, and
its methods return numpy arrays, so results cross no per-item Python objects.
:class:`PoolingEngine` adds every task with vLLM-shaped results (Engine and PoolragClient);
:class:`InProcessEngine` adds what only a model in this process has (tokenizer, batch budget,
core counters), for the doors that host one: the server, ingestion, Ray actors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from poolrag.model_facts import ModelFacts
from poolrag.outputs import (
    ClassificationOutput,
    EmbeddingOutput,
    PoolingOutput,
    PoolingRequestOutput,
    ScoringOutput,
)
from poolrag.params import PoolingParams, PoolingTask


@runtime_checkable
class PoolingBackend(Protocol):
    """Embed, score and token-embed, sync and async, plus the facts of the model behind them."""

    @property
    def facts(self) -> ModelFacts:
        """The model's dimension, Matryoshka sizes, identity, tasks and score kind."""
        ...

    def embed_array(self, prompts: Sequence[str], pooling_params: PoolingParams | None = None) -> np.ndarray:
        """``[N, D]`` float32 vectors, one row per prompt."""
        ...

    async def aembed_array(
        self, prompts: Sequence[str], pooling_params: PoolingParams | None = None
    ) -> np.ndarray: ...

    def score_array(
        self, text_1: str, text_2: Sequence[str], pooling_params: PoolingParams | None = None
    ) -> np.ndarray:
        """One float64 relevance score of each ``text_2`` item to the query ``text_1``."""
        ...

    async def ascore_array(
        self, text_1: str, text_2: Sequence[str], pooling_params: PoolingParams | None = None
    ) -> np.ndarray: ...

    def encode_arrays(
        self,
        prompts: Sequence[str],
        pooling_task: PoolingTask = "embed",
        pooling_params: PoolingParams | None = None,
    ) -> list[np.ndarray]:
        """One array per prompt (e.g. ColBERT's ``[T, D]`` token vectors for ``token_embed``; for
        ``sparse_embed`` a record array of :data:`~poolrag.outputs.SPARSE_ENTRY`, token id and weight)."""
        ...

    async def aencode_arrays(
        self,
        prompts: Sequence[str],
        pooling_task: PoolingTask = "embed",
        pooling_params: PoolingParams | None = None,
    ) -> list[np.ndarray]: ...


#: What the task methods take: one text or a list (an engine also takes token prompts).
Prompts = str | Sequence[str]


class SparseWeights(Protocol):
    """A sparse vector, sorted token ids and their weights (:class:`poolrag.sparse.SparseVector`)."""

    @property
    def indices(self) -> np.ndarray: ...

    @property
    def values(self) -> np.ndarray: ...


@runtime_checkable
class PoolingEngine(PoolingBackend, Protocol):
    """Every task of a pooling model with vLLM-shaped results, sync and async.

    What a door that offers the tasks themselves (the server's routes, the CLI, the adapters) calls;
    :class:`~poolrag.Engine` implements it in process and :class:`~poolrag.client.PoolragClient`
    over HTTP, with equal results. Results carry the token ids the model read where the
    implementation knows them (the client does not: its ``prompt_token_ids`` are empty).
    """

    def embed(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> list[PoolingRequestOutput[EmbeddingOutput]]: ...

    async def aembed(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> list[PoolingRequestOutput[EmbeddingOutput]]: ...

    def classify(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> list[PoolingRequestOutput[ClassificationOutput]]: ...

    async def aclassify(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> list[PoolingRequestOutput[ClassificationOutput]]: ...

    def score(
        self,
        text_1: str | Sequence[str],
        text_2: str | Sequence[str],
        pooling_params: PoolingParams | None = None,
    ) -> list[PoolingRequestOutput[ScoringOutput]]:
        """1:1, 1:N (one query) or N:N (zipped pairs)."""
        ...

    async def ascore(
        self,
        text_1: str | Sequence[str],
        text_2: str | Sequence[str],
        pooling_params: PoolingParams | None = None,
    ) -> list[PoolingRequestOutput[ScoringOutput]]: ...

    def encode(
        self,
        prompts: Prompts,
        pooling_task: PoolingTask = "embed",
        pooling_params: PoolingParams | None = None,
    ) -> list[PoolingRequestOutput[PoolingOutput]]:
        """Any task's raw pooled data (a vector, a per-token matrix, sparse entries, rewards)."""
        ...

    async def aencode(
        self,
        prompts: Prompts,
        pooling_task: PoolingTask = "embed",
        pooling_params: PoolingParams | None = None,
    ) -> list[PoolingRequestOutput[PoolingOutput]]: ...

    def reward(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> list[PoolingRequestOutput[PoolingOutput]]: ...

    async def areward(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> list[PoolingRequestOutput[PoolingOutput]]: ...

    def sparse_embed(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> Sequence[SparseWeights]:
        """Token id → weight vectors (SPLADE, BGE-M3's sparse head)."""
        ...

    async def asparse_embed(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> Sequence[SparseWeights]: ...

    def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """The token ids the model reads for ``text`` (with its special tokens unless told otherwise)."""
        ...


class EngineCounters(Protocol):
    """Live counters of an in-process engine's core, for metrics."""

    @property
    def batches(self) -> int: ...

    @property
    def sequences(self) -> int: ...

    @property
    def tokens(self) -> int: ...

    @property
    def padded_tokens(self) -> int: ...

    @property
    def truncated_inputs(self) -> int:
        """Inputs cut to the model's length (the default long-input policy)."""
        ...


@runtime_checkable
class InProcessEngine(PoolingEngine, Protocol):
    """A :class:`PoolingEngine` whose model runs in this process (:class:`~poolrag.Engine`).

    What the doors that host the model (the server, ingestion, Ray actors) read besides the tasks:
    the tokenizer, the batch budget, the core's counters, and a seam to turn bare token ids into
    the model's input, so none of them reaches into the engine's wiring.
    """

    @property
    def task(self) -> str:
        """The primary task (``Engine(task=...)``, else the pooler config's, else the model's first)."""
        ...

    @property
    def pooler_task(self) -> str | None:
        """The task the pooler config names (vLLM's ``PoolerConfig.task``): what ``/pooling`` runs
        when a request names none; ``None`` leaves that to vLLM's default order."""
        ...

    @property
    def id2label(self) -> dict[int, str]: ...

    @property
    def tokenizer(self) -> Any:
        """The model's transformers tokenizer."""
        ...

    @property
    def max_batch_tokens(self) -> int:
        """Token budget of one forward pass."""
        ...

    @property
    def text_token_cap(self) -> int | None:
        """The most tokens one text puts in flight: the model's length (a longer one is cut or
        refused), ``None`` where long embed inputs run whole, in chunks."""
        ...

    @property
    def model_folder(self) -> Path:
        """The local folder the model was read from (its shipped files, e.g. quantization ranges)."""
        ...

    @property
    def core_stats(self) -> EngineCounters: ...

    @property
    def late_chunking_refusal(self) -> str | None:
        """Why :meth:`embed_chunks` cannot run on this model, ``None`` where it can: known before
        any input, so a door refuses before it makes anything (an ingest, its collection)."""
        ...

    @property
    def closed(self) -> bool:
        """Whether the engine no longer takes work (closed, or its scheduler stopped on a fault)."""
        ...

    def frame_token_ids(self, ids: Sequence[int], input_type: str | None = None) -> list[int] | None:
        """The model input for a text whose bare token ids are ``ids``; ``None`` where the text
        itself must go (an instruction prompt, ColBERT markers, special tokens that vary)."""
        ...

    async def ascore(
        self,
        text_1: str | Sequence[str],
        text_2: str | Sequence[str],
        pooling_params: PoolingParams | None = None,
        *,
        template_variables: Mapping[str, Any] | None = None,
    ) -> list[PoolingRequestOutput[ScoringOutput]]:
        """:meth:`PoolingEngine.ascore`, with the variables of the model's score template for this
        call (vLLM's ``instruction`` / ``chat_template_kwargs``); refused without a template."""
        ...

    # Late chunking lives here, not on PoolingEngine: a span becomes token rows through the model's
    # own tokenizer offsets and windows, which only the process holding the model has.
    def embed_chunks(
        self, document: str, spans: Sequence[tuple[int, int]], pooling_params: PoolingParams | None = None
    ) -> np.ndarray:
        """Late chunking: one vector per character span, pooled from one pass over ``document``."""
        ...

    async def aembed_chunks(
        self, document: str, spans: Sequence[tuple[int, int]], pooling_params: PoolingParams | None = None
    ) -> np.ndarray: ...

    # Pairs through a classifier of several labels (TEI's /predict): only the server calls it, so it
    # is not on PoolingEngine, which the HTTP client implements too.
    async def aclassify_pairs(
        self,
        text_1: str | Sequence[str],
        text_2: str | Sequence[str],
        pooling_params: PoolingParams | None = None,
    ) -> list[PoolingRequestOutput[ClassificationOutput]]:
        """Every label's score for each pair read jointly (an NLI model's pairs), as CrossEncoder.predict."""
        ...
