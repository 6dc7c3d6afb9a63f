"""``POST /pooling``: any pooling task's raw output (token embeddings, rewards, ...) as nested lists."""

from __future__ import annotations

from fastapi import APIRouter, Request

from poolrag.params import PoolingParams
from poolrag.server.inputs import to_prompts
from poolrag.server.openapi import ENGINE_ERRORS
from poolrag.server.routing import OffLoopRoute
from poolrag.server.schemas import PoolingData, PoolingRequest, PoolingResponse, Usage
from poolrag.server.state import new_id, now, server_state

router = APIRouter(tags=["pooling"], route_class=OffLoopRoute)
PATH = "/pooling"


@router.post(PATH, response_model=PoolingResponse, responses=ENGINE_ERRORS)
async def pooling(body: PoolingRequest, request: Request) -> PoolingResponse:
    state = server_state(request)
    state.check_model(body.model)
    prompts = to_prompts(body.input, state.settings)
    task = body.task or state.engine.task
    params = PoolingParams(
        dimensions=body.dimensions,
        normalize=body.normalize,
        use_activation=body.use_activation,
        truncate_prompt_tokens=body.truncate_prompt_tokens,
        input_type=body.input_type,
    )
    params.verify(task, state.engine.facts)  # refused before the request takes a slot
    outputs = await state.run_engine(PATH, "encode", len(prompts), prompts, task, params)
    tokens = sum(out.num_tokens for out in outputs)
    return PoolingResponse(
        id=new_id("pool"),
        created=now(),
        model=state.settings.model_name,
        data=[PoolingData(index=i, data=out.outputs.data.tolist()) for i, out in enumerate(outputs)],
        usage=Usage(prompt_tokens=tokens, total_tokens=tokens),
    )
