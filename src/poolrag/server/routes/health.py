"""``GET /health``: liveness for load balancers (no API key needed)."""

from __future__ import annotations

from fastapi import APIRouter

from poolrag.server.schemas import HealthResponse

router = APIRouter(tags=["operations"])


@router.get("/health", response_model=HealthResponse)
async def health() -> HealthResponse:
    return HealthResponse()
