"""``POST /pooling``: any pooling task's raw output (token embeddings, rewards, ...) as nested lists;
``sparse_embed`` as ``{index, value}`` objects."""

from __future__ import annotations

import numpy as np
from fastapi import APIRouter, Request, Response

from poolrag.outputs import SPARSE_ENTRY
from poolrag.params import PoolingParams
from poolrag.server.inputs import input_count, to_prompts
from poolrag.server.openapi import ENGINE_ERRORS
from poolrag.server.routing import OffLoopRoute
from poolrag.server.schemas import PoolingData, PoolingRequest, PoolingResponse, SparseEntry, Usage
from poolrag.server.state import model_state, new_id, now
from poolrag.server.truncation_report import report_truncated

router = APIRouter(tags=["pooling"], route_class=OffLoopRoute)
PATH = "/pooling"


def sparse_entries(data: np.ndarray) -> list[SparseEntry]:
    """A sparse result's (token id, weight) records as the wire's ``{index, value}`` objects."""
    ids, weights = data["index"].tolist(), data["value"].tolist()
    return [SparseEntry(index=i, value=v) for i, v in zip(ids, weights, strict=True)]


def _wire(data: np.ndarray) -> float | list[float] | list[list[float]] | list[SparseEntry]:
    return sparse_entries(data) if data.dtype == SPARSE_ENTRY else data.tolist()


@router.post(PATH, response_model=PoolingResponse, responses=ENGINE_ERRORS)
async def pooling(body: PoolingRequest, request: Request, response: Response) -> PoolingResponse:
    state = model_state(request, body.model)
    prompts = to_prompts(body.input, state.settings)
    task = body.task or state.engine.task
    params = PoolingParams(
        dimensions=body.dimensions,
        normalize=body.normalize,
        use_activation=body.use_activation,
        truncate_prompt_tokens=body.cut_for(state.engine.facts),
        truncate=body.truncate,
        input_type=body.input_type,
        max_active_dims=body.max_active_dims,
    )
    params.verify(task, state.engine.facts)  # refused before the request takes a slot
    outputs = await state.run_engine(PATH, input_count(prompts), state.engine.aencode, prompts, task, params)
    tokens = sum(out.num_tokens for out in outputs)
    report_truncated(response, outputs)
    return PoolingResponse(
        id=new_id("pool", body.request_id),
        created=now(),
        model=state.settings.model_name,
        data=[PoolingData(index=i, data=_wire(out.outputs.data)) for i, out in enumerate(outputs)],
        usage=Usage(prompt_tokens=tokens, total_tokens=tokens),
    )
