"""The app factory: one or several engines behind OpenAI / vLLM / Jina / Cohere / TEI-shaped endpoints."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import FastAPI

import poolrag
from poolrag.postprocess.quantization_ranges import QuantizationRanges, shipped_ranges
from poolrag.server.admission import Admission
from poolrag.server.auth import APIKeyMiddleware
from poolrag.server.body_limit import BodySizeLimitMiddleware
from poolrag.server.cors import add_cors
from poolrag.server.engine_calls import EngineCalls
from poolrag.server.errors import install_error_handlers
from poolrag.server.heap_trim import HeapTrimMiddleware, IdleTrim
from poolrag.server.host_check import HostCheckMiddleware
from poolrag.server.metrics import MetricsMiddleware, ServerMetrics
from poolrag.server.model_identity import ModelIdentityMiddleware
from poolrag.server.openapi import install_openapi
from poolrag.server.request_id import RequestIdMiddleware
from poolrag.server.routes import (
    classify,
    cohere_embed,
    embed_sparse,
    embeddings,
    health,
    metrics,
    models,
    pooling,
    rerank,
    score,
    tei_embed,
    tei_info,
    tei_predict,
    tei_similarity,
    tei_tokenize,
    tokenize,
)
from poolrag.server.routes.invocations import invocations_router
from poolrag.server.routes.tei_root import root_router
from poolrag.server.settings import Limits, ServerSettings
from poolrag.server.state import ServedModels, ServerState, check_unique_names, now
from poolrag.server.stop_answer import StopAnswerMiddleware

if TYPE_CHECKING:
    from poolrag.backend import InProcessEngine

logger = logging.getLogger(__name__)

_ROUTERS = (embeddings, score, rerank, classify, pooling, embed_sparse, tokenize, models, health, metrics)
_ROUTERS += (cohere_embed,)  # Cohere's embed API beside OpenAI's
_ROUTERS += (tei_embed, tei_predict, tei_similarity, tei_tokenize, tei_info)  # TEI's own API


def create_app(engine: InProcessEngine, settings: ServerSettings) -> FastAPI:
    """Build the ASGI app serving ``engine``: the server runs the model in its own process."""
    return create_models_app([(engine, settings)])


def _loosest(limits: Sequence[Limits]) -> Limits:
    """The per-field largest of ``limits``: a body is parsed under these before it names its model."""
    fields = Limits.__dataclass_fields__
    return Limits(**{name: max(getattr(one, name) for one in limits) for name in fields})


def _quantization_ranges(engine: InProcessEngine, settings: ServerSettings) -> QuantizationRanges | None:
    """The server's ranges file, else the one the model folder ships (read once, at start-up); none
    for a model that gives no embeddings to scale (``--calibration`` applies to every model served,
    a reranker beside the embedder it was measured on included)."""
    if "embed" not in engine.facts.supported_tasks:
        return None
    ranges = (
        QuantizationRanges.load(settings.calibration)
        if settings.calibration is not None
        else shipped_ranges(engine.model_folder)
    )
    if ranges is not None:
        ranges.check_model(engine.facts)  # a file no width of this model can use stops the start
    return ranges


def create_models_app(served: Sequence[tuple[InProcessEngine, ServerSettings]]) -> FastAPI:
    """Build the ASGI app serving several engines; each request picks one by its ``model`` field.

    The first model answers requests that name none, and its settings are the process's: API key,
    allowed hosts and origins, body size and deadlines, and the body bytes in flight. Each model
    keeps its own served names, per-request limits, queue (``max_queue``), token budget
    (``max_inflight_tokens``), thread pool and ``model`` metrics label.

    Middleware order, outermost first: the request id when ``request_id_headers`` is set (every
    answer carries it, refusals included), metrics (sees every answer), ``Host`` check, CORS when
    origins are listed (a preflight is answered there, before the key: :mod:`poolrag.server.cors`),
    API key (before any body is read), the 503 of a request uvicorn cancels as it stops
    (:mod:`poolrag.server.stop_answer`), body size/time limit and byte budget, the heap trimmed
    after a large body and once the server idles (:mod:`poolrag.server.heap_trim`), the routed
    model's identity on each answer past those (:mod:`poolrag.server.model_identity`), then
    FastAPI's routing; the POST routes parse and validate off the event loop
    (:mod:`poolrag.server.routing`). FastAPI's own error middleware stays outside them all.
    """
    if not served:
        raise ValueError("create_models_app needs at least one engine")
    check_unique_names([settings.served_model_names for _, settings in served])
    settings = served[0][1]
    server_metrics = ServerMetrics([(model_settings.model_name, engine) for engine, model_settings in served])
    started = now()
    models = _model_states(served, server_metrics, started)
    idle_trim = IdleTrim(settings.idle_trim_s, lambda: [model.engine.tokenizer for model in models])

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        for model in models:
            logger.info(
                "serving %s as %s (tasks: %s)",
                model.engine.facts.model_name,
                ", ".join(model.settings.served_model_names),
                ", ".join(model.engine.facts.supported_tasks),
            )
        trimmer = asyncio.create_task(idle_trim.run())
        try:
            yield
        finally:
            trimmer.cancel()
            for model in models:
                model.calls.close()

    app = FastAPI(
        title="poolrag",
        version=poolrag.__version__,
        description="OpenAI-compatible embeddings, scoring, reranking, classification and pooling.",
        lifespan=lifespan,
        **({} if settings.api_docs else {"docs_url": None, "redoc_url": None, "openapi_url": None}),
    )
    app.state.poolrag = ServedModels(
        models=tuple(models),
        settings=settings,
        parse_limits=_loosest([model.limits for model in models]),
        metrics=server_metrics,
        started=started,
    )
    for module in _ROUTERS:
        app.include_router(module.router)
    app.include_router(root_router(app.state.poolrag))  # TEI's POST /: the named (else first) model's kind
    app.include_router(invocations_router(app.state.poolrag))  # SageMaker's: TEI's bodies and vLLM's
    install_error_handlers(app)
    install_openapi(app)
    _install_middleware(app, settings, models, server_metrics, idle_trim)
    return app


def _model_states(
    served: Sequence[tuple[InProcessEngine, ServerSettings]], server_metrics: ServerMetrics, started: int
) -> list[ServerState]:
    """Each served model's state: its limits, admission (queue, bytes and tokens in flight), thread
    pool and quantization ranges, its metrics started under its ``model`` label."""
    models = []
    for engine, model_settings in served:
        name = model_settings.model_name
        limits = Limits.resolve(model_settings, engine.facts.max_model_len)
        admission = Admission(
            model_settings.max_queue,
            limits.max_inflight_bytes,
            limits.max_inflight_tokens,
            model_settings.retry_after_s,
            server_metrics,
            name,
        )
        server_metrics.start_model(name, model_settings.max_queue)
        calls = EngineCalls(engine, model_settings.engine_threads)
        ranges = _quantization_ranges(engine, model_settings)
        models.append(
            ServerState(engine, model_settings, limits, calls, admission, server_metrics, started, ranges)
        )
    return models


def _install_middleware(
    app: FastAPI,
    settings: ServerSettings,
    models: Sequence[ServerState],
    server_metrics: ServerMetrics,
    idle_trim: IdleTrim,
) -> None:
    """The middleware in :func:`create_models_app`'s order: each ``add_middleware`` wraps those
    added before it (Starlette inserts it first in ``user_middleware``), so the last added is outermost."""
    app.add_middleware(ModelIdentityMiddleware, facts=[model.served_facts for model in models])
    app.add_middleware(HeapTrimMiddleware, idle=idle_trim)  # inside the body limit: admitted bodies count
    app.add_middleware(
        BodySizeLimitMiddleware,
        max_body_bytes=settings.max_body_bytes,
        admission=models[0].admission,  # its byte budget is the process's
        body_timeout_s=settings.body_timeout_s,
    )
    app.add_middleware(StopAnswerMiddleware)  # outside the body's reading: a body still arriving too
    if settings.api_key is not None:
        app.add_middleware(APIKeyMiddleware, api_key=settings.api_key)
    add_cors(app, settings)
    app.add_middleware(HostCheckMiddleware, settings=settings)
    app.add_middleware(
        MetricsMiddleware,
        metrics=server_metrics,
        routes=lambda: app.routes,
    )
    if settings.request_id_headers:  # outermost: every answer carries it, refusals included
        app.add_middleware(RequestIdMiddleware)
