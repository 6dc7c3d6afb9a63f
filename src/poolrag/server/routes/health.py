"""``GET /health``: liveness for load balancers (no API key needed). ``HEAD`` too, as TEI answers it:
some uptime monitors probe with it. TEI's other probes answer the same: ``GET /ping`` (SageMaker's,
no key needed either; ``POST`` too, as vLLM's SageMaker route takes it) and ``GET /`` (the
Inference API's). ``GET /version`` is vLLM's: the server's
version, for deployment checks (no key needed: it names no model)."""

from __future__ import annotations

from fastapi import APIRouter, Request

import poolrag
from poolrag.server.errors import APIError
from poolrag.server.schemas import HealthResponse, VersionResponse
from poolrag.server.state import served_models

router = APIRouter(tags=["operations"])


@router.get(
    "/health", response_model=HealthResponse, responses={503: {"description": "A model's engine stopped"}}
)
async def health(request: Request) -> HealthResponse:
    """200 while every model's engine takes work; 503 once one stopped (closed while the server
    stops, or its scheduler died on a fault), so a load balancer or Kubernetes moves traffic away,
    as vLLM's and TEI's health checks do."""
    stopped = [model.name for model in served_models(request).models if model.engine.closed]
    if stopped:
        raise APIError(503, f"the engine of {', '.join(stopped)} stopped", code="engine_closed")
    return HealthResponse()


router.add_api_route("/health", health, methods=["HEAD"], include_in_schema=False)  # TEI publishes GET only
router.add_api_route("/ping", health, methods=["GET", "HEAD", "POST"], include_in_schema=False)
router.add_api_route("/", health, methods=["GET", "HEAD"], include_in_schema=False)


@router.get("/version", response_model=VersionResponse)
async def version() -> VersionResponse:
    return VersionResponse(version=poolrag.__version__)
