"""``GET /health``: liveness for load balancers (no API key needed). ``HEAD`` too, as TEI answers it:
some uptime monitors probe with it. TEI's other probes answer the same: ``GET /ping`` (SageMaker's,
no key needed either) and ``GET /`` (the Inference API's). ``GET /version`` is vLLM's: the server's
version, for deployment checks (no key needed: it names no model)."""

from __future__ import annotations

from fastapi import APIRouter

import poolrag
from poolrag.server.schemas import HealthResponse, VersionResponse

router = APIRouter(tags=["operations"])


@router.get("/health", response_model=HealthResponse)
async def health() -> HealthResponse:
    return HealthResponse()


router.add_api_route("/health", health, methods=["HEAD"], include_in_schema=False)  # TEI publishes GET only
for probe in ("/ping", "/"):
    router.add_api_route(probe, health, methods=["GET", "HEAD"], include_in_schema=False)


@router.get("/version", response_model=VersionResponse)
async def version() -> VersionResponse:
    return VersionResponse(version=poolrag.__version__)
