"""``GET /v1/models``: every served name, so clients can discover what to pass as ``model``, and
each model's facts, so the HTTP client knows what an in-process engine would."""

from __future__ import annotations

from fastapi import APIRouter, Request

from poolrag.server.openapi import READ_ERRORS
from poolrag.server.schemas import ModelCard, ModelList
from poolrag.server.state import served_models

router = APIRouter(tags=["models"])


@router.get("/v1/models", response_model=ModelList, responses=READ_ERRORS)
async def list_models(request: Request) -> ModelList:
    cards = [
        ModelCard(
            id=name,
            created=state.started,
            root=state.served_facts.model_name,
            tasks=list(state.served_facts.supported_tasks),
            **state.served_facts.to_json(),
        )
        for state in served_models(request).models
        for name in state.settings.served_model_names
    ]
    return ModelList(data=cards)
