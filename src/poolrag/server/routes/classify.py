"""``POST /classify``: vLLM's classification API (label, probabilities per input)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from poolrag.params import PoolingParams
from poolrag.server.inputs import input_count, to_prompts
from poolrag.server.openapi import ENGINE_ERRORS
from poolrag.server.routing import OffLoopRoute
from poolrag.server.schemas import ClassificationData, ClassificationRequest, ClassificationResponse, Usage
from poolrag.server.state import model_state, new_id, now
from poolrag.server.truncation_report import report_truncated

router = APIRouter(tags=["classification"], route_class=OffLoopRoute)
PATH = "/classify"


@router.post(PATH, response_model=ClassificationResponse, responses=ENGINE_ERRORS)
async def classify(
    body: ClassificationRequest, request: Request, response: Response
) -> ClassificationResponse:
    state = model_state(request, body.model)
    prompts = to_prompts(body.input, state.settings)
    params = PoolingParams(
        truncate_prompt_tokens=body.cut_for(state.engine.facts),
        truncate=body.truncate,
        use_activation=body.use_activation,
    )
    outputs = await state.run_engine(PATH, input_count(prompts), state.engine.aclassify, prompts, params)
    id2label = state.engine.id2label
    data = []
    for i, out in enumerate(outputs):
        probs = out.outputs.probs
        best = int(probs.argmax())
        label = id2label.get(best, f"LABEL_{best}")
        data.append(ClassificationData(index=i, label=label, probs=probs.tolist(), num_classes=len(probs)))
    tokens = sum(out.num_tokens for out in outputs)
    report_truncated(response, outputs)
    return ClassificationResponse(
        id=new_id("classify", body.request_id),
        created=now(),
        model=state.settings.model_name,
        data=data,
        usage=Usage(prompt_tokens=tokens, total_tokens=tokens),
    )
