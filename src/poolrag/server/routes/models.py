"""``GET /v1/models``: the served names, so clients can discover what to pass as ``model``, and the
model's facts, so the HTTP client knows what an in-process engine would."""

from __future__ import annotations

from fastapi import APIRouter, Request

from poolrag.server.openapi import READ_ERRORS
from poolrag.server.schemas import ModelCard, ModelList
from poolrag.server.state import server_state

router = APIRouter(tags=["models"])


@router.get("/v1/models", response_model=ModelList, responses=READ_ERRORS)
async def list_models(request: Request) -> ModelList:
    state = server_state(request)
    facts = state.served_facts
    cards = [
        ModelCard(
            id=name,
            created=state.started,
            root=facts.model_name,
            tasks=list(facts.supported_tasks),
            **facts.to_json(),
        )
        for name in state.settings.served_model_names
    ]
    return ModelList(data=cards)
