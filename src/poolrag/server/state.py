"""What every route needs: the served models (each with its engine, limits, admission budget and
metrics label) and the process-wide settings and metrics of one app.

Routes find their model through ONE function, :func:`model_state`, which reads the request's
``model`` field: absent or empty (``""``, as vLLM reads it) means the first model served, a served
name that model, the short name of a served hub id (``all-MiniLM-L6-v2`` for
``sentence-transformers/all-MiniLM-L6-v2``, as tutorials spell it) that model too unless two models
share it, as does the folder path it was loaded from (vLLM's clients send the ``--model`` they were
given; the path is accepted, never reported), and an unknown name is a 404 naming the served ones.
Body bytes are budgeted per process (they are read before the body names a model); queue slots and
tokens in flight per model, so one model's full queue does not refuse another's requests.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from fastapi import Request

from poolrag.errors import UnsupportedTaskError, quoted_name
from poolrag.model_facts import ModelFacts, answering_model, naming_served
from poolrag.postprocess.quantization_ranges import QuantizationRanges
from poolrag.server.admission import Admission
from poolrag.server.engine_calls import EngineCalls
from poolrag.server.errors import APIError
from poolrag.server.metrics import ServerMetrics
from poolrag.server.settings import Limits, ServerSettings
from poolrag.tokenization.text_cut import text_cut_of

if TYPE_CHECKING:
    from poolrag.backend import InProcessEngine

T = TypeVar("T")
P = ParamSpec("P")
logger = logging.getLogger(__name__)

#: The ASGI scope key naming the model a request was routed to (read by the identity middleware).
SCOPE_MODEL_KEY = "poolrag.model"


@dataclass(slots=True)
class ServerState:
    """One served model: its engine, its own limits, thread pool, admission budget and label."""

    engine: InProcessEngine
    settings: ServerSettings
    limits: Limits
    calls: EngineCalls
    admission: Admission
    metrics: ServerMetrics
    started: int
    ranges: QuantizationRanges | None = None  # int8/uint8 scales: the server's file or the model's

    @property
    def name(self) -> str:
        """The name reported in answers and used as the ``model`` label in ``/metrics``."""
        return self.settings.model_name

    @property
    def served_facts(self) -> ModelFacts:
        """The engine's facts under the served name: the folder's path is the host's business."""
        return self.engine.facts.renamed(self.settings.model_name)

    async def run_engine(
        self,
        path: str,
        num_inputs: int,
        call: Callable[P, Awaitable[T]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """Admit the request (or 503), run one of the engine's async tasks, record batch size,
        engine time and, for per-input outputs, the tokens the model read."""
        async with self.admission.slot():
            started = time.perf_counter()
            result = await call(*args, **kwargs)
            self.metrics.engine_latency.labels(self.name, path).observe(time.perf_counter() - started)
        self.metrics.batch_size.labels(self.name, path).observe(num_inputs)
        if isinstance(result, list):
            tokens = sum(getattr(item, "num_tokens", 0) for item in result)
            self.metrics.prompt_tokens.labels(self.name, path).inc(tokens)
        return result

    async def run_blocking(self, path: str, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Admit the request (or 503) and run a blocking helper off the loop."""
        async with self.admission.slot():
            started = time.perf_counter()
            result = await self.calls.offload(fn, *args, **kwargs)
            self.metrics.engine_latency.labels(self.name, path).observe(time.perf_counter() - started)
        return result

    async def first_tokens(
        self, path: str, items: Sequence[T], limit: int | None
    ) -> tuple[list[T], list[bool]]:
        """Each text of ``items`` through its first ``limit`` tokens (vLLM's ``max_tokens_per_query`` /
        ``max_tokens_per_doc``, Cohere's ``max_tokens_per_doc``); an image as it is. ``None``, 0 or
        a limit of the model's length or more cuts nothing the model would have read (Haystack and
        LangChain send 4,096 by default), so only a smaller one costs a tokenising pass, off the loop.
        Also whether each item was cut: the engine never sees these cuts, so the route counts them
        in ``X-Truncated-Inputs`` itself."""
        if not limit or limit >= self.engine.facts.max_model_len:
            return list(items), [False] * len(items)
        cut = text_cut_of(self.engine.tokenizer)
        kept = await self.run_blocking(
            path,
            lambda: [cut.first(item, limit) if isinstance(item, str) else item for item in items],  # type: ignore[misc]
        )
        return kept, [after != before for before, after in zip(items, kept, strict=True)]


@dataclass(slots=True)
class ServedModels:
    """The models of one app, in the order given (the first answers requests naming none, unless
    it does not run the route's task and another does)."""

    models: tuple[ServerState, ...]
    settings: ServerSettings
    parse_limits: Limits
    metrics: ServerMetrics
    started: int
    short_names: dict[str, ServerState] = field(init=False, default_factory=dict)
    folder_names: dict[str, ServerState] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.short_names = short_names(self.models)
        self.folder_names = folder_names(self.models)

    @property
    def default(self) -> ServerState:
        return self.models[0]

    @property
    def served_names(self) -> tuple[str, ...]:
        return tuple(name for model in self.models for name in model.settings.served_model_names)

    def for_task(self, task: str | None) -> ServerState:
        """The model answering a request that names none (:func:`answering_model`). A TEI client
        cannot name a model, so its ``/rerank`` beside an embedder reaches the reranker served with
        it, not cosine."""
        return self.models[answering_model([served.engine.facts for served in self.models], task)]

    def lookup(self, model: str | None, task: str | None = None) -> ServerState:
        """The model serving ``model`` (a served name; ``None`` or ``""``: :meth:`for_task`), or
        the 404 naming them."""
        if not model:
            return self.for_task(task)
        for served in self.models:
            if model in served.settings.served_model_names:
                return served
        if model in self.short_names:
            return self.short_names[model]
        if model in self.folder_names:
            return self.folder_names[model]
        raise self.not_served(model)

    def not_served(self, model: str) -> APIError:
        """The 404 of a model name no served model answers to, naming those that do."""
        names = ", ".join(repr(name) for name in self.served_names)
        return APIError(
            404,
            f"model {quoted_name(model)} is not served here; use {names}",
            param="model",
            code="model_not_found",
        )

    def task_refusal(self, served: ServerState, exc: UnsupportedTaskError) -> UnsupportedTaskError:
        """``exc`` (the engine's "this model") naming ``served`` by its served name, and with several
        models the others that run the task: a request naming none reached ``served`` unasked."""
        return naming_served(exc, served.served_facts, [model.served_facts for model in self.models])


def served_models(request: Request) -> ServedModels:
    """The app's models and process-wide settings and metrics."""
    return request.app.state.poolrag


def model_state(request: Request, model: str | None, task: str | None = None) -> ServerState:
    """The served model a request names in its ``model`` field (naming none, the first that runs
    the route's ``task``), looked up once per request: the route class finds it before the endpoint
    runs (to hold its budget), the endpoint reads it here."""
    served = request.scope.get(SCOPE_MODEL_KEY)
    if served is None:
        served = request.scope[SCOPE_MODEL_KEY] = served_models(request).lookup(model, task)
    return served


def short_name(name: str) -> str | None:
    """The model part of a hub id (``org/name`` → ``name``); ``None`` for a name of another form."""
    org, slash, rest = name.partition("/")
    return rest if slash and org and rest and "/" not in rest else None


def short_names(models: Sequence[ServerState]) -> dict[str, ServerState]:
    """The short name of each served hub id and its model: only names no other model is served
    under, or also shortens to (those answer under their full names only, and a warning says so)."""
    served = {name for model in models for name in model.settings.served_model_names}
    found: dict[str, set[int]] = {}
    for i, model in enumerate(models):
        for name in model.settings.served_model_names:
            short = short_name(name)
            if short is not None and short not in served:
                found.setdefault(short, set()).add(i)
    answered = {}
    for short, owners in found.items():
        if len(owners) == 1:
            answered[short] = models[owners.pop()]
        else:
            full = ", ".join(sorted(models[i].name for i in owners))
            logger.warning(
                "%r names no model here: %s all end in it; ask for them by their full names", short, full
            )
    return answered


def folder_names(models: Sequence[ServerState]) -> dict[str, ServerState]:
    """Each model loaded from a local folder under the path it was given and its absolute path,
    unless that is another model's served name: ``vllm serve ./ner`` answers ``"model": "./ner"``."""
    served = {name for model in models for name in model.settings.served_model_names}
    answered: dict[str, ServerState] = {}
    for model in models:
        given = model.engine.facts.model_name
        folder = Path(given).expanduser()
        if folder.is_dir():
            for name in (given, str(folder.resolve())):
                if name not in served:
                    answered.setdefault(name, model)
    return answered


def check_unique_names(groups: Sequence[Sequence[str]]) -> None:
    """Raise ``ValueError`` naming the first served name given to two models."""
    seen: set[str] = set()
    for names in groups:
        if len(set(names)) < len(names):
            twice = next(name for name in names if names.count(name) > 1)
            raise ValueError(f"served model name {twice!r} is given twice to one model; give it once")
        for name in names:
            if name in seen:
                raise ValueError(f"served model name {name!r} is given to two models; give each its own")
            seen.add(name)


def new_id(prefix: str, request_id: str | None = None) -> str:
    """The answer's id: the client's ``request_id`` when it sent one (vLLM's field), else a fresh one."""
    return request_id if request_id is not None else f"{prefix}-{uuid.uuid4().hex}"


def now() -> int:
    return int(time.time())
