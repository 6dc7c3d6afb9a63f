"""``GET /v1/models``: every served name, so clients can discover what to pass as ``model``, and
each model's facts, so the HTTP client knows what an in-process engine would; ``GET
/v1/models/{model}`` one of them, as OpenAI's ``client.models.retrieve`` asks."""

from __future__ import annotations

from fastapi import APIRouter, Request

from poolrag.server.openapi import ENGINE_ERRORS, READ_ERRORS
from poolrag.server.schemas import ModelCard, ModelList
from poolrag.server.state import ServerState, model_state, served_models

router = APIRouter(tags=["models"])


def _card(state: ServerState, name: str) -> ModelCard:
    facts = state.served_facts
    return ModelCard(
        id=name,
        created=state.started,
        root=facts.model_name,
        tasks=list(facts.supported_tasks),
        max_inputs_per_request=state.settings.max_inputs,  # the client splits its calls by it
        max_queue=state.settings.max_queue,  # and sends at most this many of a call's at once
        late_chunking_refusal=state.engine.late_chunking_refusal,  # the client refuses before any input
        **facts.to_json(),
    )


@router.get("/v1/models", response_model=ModelList, responses=READ_ERRORS)
async def list_models(request: Request) -> ModelList:
    cards = [
        _card(state, name)
        for state in served_models(request).models
        for name in state.settings.served_model_names
    ]
    return ModelList(data=cards)


@router.get(
    "/v1/models/{model:path}", response_model=ModelCard, responses={**READ_ERRORS, 404: ENGINE_ERRORS[404]}
)
async def retrieve_model(model: str, request: Request) -> ModelCard:
    """The card ``/v1/models`` lists under ``model``; a name only accepted (a folder's path, a hub
    id's short name) is described under the model's reported name, as its answers name it. An
    empty name (``GET /v1/models/``) names no model: OpenAI's and vLLM's 404, not the first model's
    card, which a request body naming none would reach."""
    if not model:
        raise served_models(request).not_served(model)
    state = model_state(request, model)
    return _card(state, model if model in state.settings.served_model_names else state.name)
