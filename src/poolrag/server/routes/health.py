"""``GET /health``: liveness for load balancers (no API key needed). ``HEAD`` too, as TEI answers it:
some uptime monitors probe with it. TEI's other probes answer the same: ``GET /ping`` (SageMaker's,
no key needed either) and ``GET /`` (the Inference API's)."""

from __future__ import annotations

from fastapi import APIRouter

from poolrag.server.schemas import HealthResponse

router = APIRouter(tags=["operations"])


@router.get("/health", response_model=HealthResponse)
async def health() -> HealthResponse:
    return HealthResponse()


router.add_api_route("/health", health, methods=["HEAD"], include_in_schema=False)  # TEI publishes GET only
for probe in ("/ping", "/"):
    router.add_api_route(probe, health, methods=["GET", "HEAD"], include_in_schema=False)
