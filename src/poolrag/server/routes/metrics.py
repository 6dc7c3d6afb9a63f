"""``GET /metrics``: Prometheus text exposition of this server's metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from poolrag.server.openapi import READ_ERRORS
from poolrag.server.state import served_models

router = APIRouter(tags=["operations"])


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus metrics"}, **READ_ERRORS},
)
async def metrics(request: Request) -> Response:
    return Response(served_models(request).metrics.render(), media_type=CONTENT_TYPE_LATEST)
