"""The app factory: one engine behind OpenAI / vLLM / Jina / Cohere-shaped endpoints."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import FastAPI

import poolrag
from poolrag.server.admission import Admission
from poolrag.server.auth import APIKeyMiddleware
from poolrag.server.body_limit import BodySizeLimitMiddleware
from poolrag.server.engine_calls import EngineCalls
from poolrag.server.errors import install_error_handlers
from poolrag.server.heap_trim import HeapTrimMiddleware
from poolrag.server.host_check import HostCheckMiddleware
from poolrag.server.metrics import MetricsMiddleware, ServerMetrics
from poolrag.server.model_identity import ModelIdentityMiddleware
from poolrag.server.openapi import install_openapi
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
    tokenize,
)
from poolrag.server.settings import Limits, ServerSettings
from poolrag.server.state import ServerState, now

if TYPE_CHECKING:
    from poolrag.backend import InProcessEngine

logger = logging.getLogger(__name__)

_ROUTERS = (embeddings, score, rerank, classify, pooling, embed_sparse, tokenize, models, health, metrics)
_ROUTERS += (cohere_embed,)  # Cohere's embed API beside OpenAI's


def create_app(engine: InProcessEngine, settings: ServerSettings) -> FastAPI:
    """Build the ASGI app serving ``engine``: the server runs the model in its own process.

    Middleware order, outermost first: metrics (sees every answer), ``Host`` check, API key
    (before any body is read), body size/time limit and byte budget, the heap trimmed after a
    large body (:mod:`poolrag.server.heap_trim`), the model's identity on each answer past those
    (:mod:`poolrag.server.model_identity`), then FastAPI's routing; the POST routes parse and
    validate off the event loop (:mod:`poolrag.server.routing`).
    """
    server_metrics = ServerMetrics(settings.max_queue, engine)
    calls = EngineCalls(engine, settings.engine_threads)
    limits = Limits.resolve(settings, engine.facts.max_model_len)
    admission = Admission(
        settings.max_queue,
        limits.max_inflight_bytes,
        limits.max_inflight_tokens,
        settings.retry_after_s,
        server_metrics,
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        logger.info(
            "serving %s as %s (tasks: %s)",
            engine.facts.model_name,
            ", ".join(settings.served_model_names),
            ", ".join(engine.facts.supported_tasks),
        )
        try:
            yield
        finally:
            calls.close()

    app = FastAPI(
        title="poolrag",
        version=poolrag.__version__,
        description="OpenAI-compatible embeddings, scoring, reranking, classification and pooling.",
        lifespan=lifespan,
    )
    app.state.poolrag = ServerState(
        engine=engine,
        settings=settings,
        limits=limits,
        calls=calls,
        admission=admission,
        metrics=server_metrics,
        started=now(),
    )
    for module in _ROUTERS:
        app.include_router(module.router)
    install_error_handlers(app)
    install_openapi(app)

    app.add_middleware(ModelIdentityMiddleware, facts=app.state.poolrag.served_facts)
    app.add_middleware(HeapTrimMiddleware)  # inside the body limit: only admitted bodies count
    app.add_middleware(
        BodySizeLimitMiddleware,
        max_body_bytes=settings.max_body_bytes,
        admission=admission,
        body_timeout_s=settings.body_timeout_s,
    )
    if settings.api_key is not None:
        app.add_middleware(APIKeyMiddleware, api_key=settings.api_key)
    app.add_middleware(HostCheckMiddleware, settings=settings)
    app.add_middleware(
        MetricsMiddleware, metrics=server_metrics, known_paths=lambda: app.openapi()["paths"].keys()
    )
    return app
