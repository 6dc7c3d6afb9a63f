"""``GET /v1/models``: the served names, so clients can discover what to pass as ``model``."""

from __future__ import annotations

from fastapi import APIRouter, Request

from poolrag.server.openapi import READ_ERRORS
from poolrag.server.schemas import ModelCard, ModelList
from poolrag.server.state import server_state

router = APIRouter(tags=["models"])


@router.get("/v1/models", response_model=ModelList, responses=READ_ERRORS)
async def list_models(request: Request) -> ModelList:
    state = server_state(request)
    engine = state.engine
    cards = [
        ModelCard(
            id=name,
            created=state.started,
            root=state.settings.model_name,  # the served name: the folder's path is the host's business
            max_model_len=engine.max_model_len,
            tasks=list(engine.supported_tasks),
        )
        for name in state.settings.served_model_names
    ]
    return ModelList(data=cards)
