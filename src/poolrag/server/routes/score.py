"""``POST /score`` and ``/v1/score``: vLLM's pair scoring (1:1, 1:N or N:N)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from poolrag.server.inputs import check_input_count, score_params
from poolrag.server.openapi import ENGINE_ERRORS
from poolrag.server.routing import OffLoopRoute
from poolrag.server.schemas import ScoreData, ScoreRequest, ScoreResponse, Usage
from poolrag.server.scope_path import route_path
from poolrag.server.state import model_state, new_id, now
from poolrag.server.truncation_report import pairs_cut, report_truncated

router = APIRouter(tags=["scoring"], route_class=OffLoopRoute)


async def score_pairs(body: ScoreRequest, request: Request, response: Response) -> ScoreResponse:
    state = model_state(request, body.model)
    firsts = [body.text_1] if isinstance(body.text_1, str) else list(body.text_1)
    seconds = [body.text_2] if isinstance(body.text_2, str) else list(body.text_2)
    check_input_count(state.settings, len(firsts), "text_1")
    check_input_count(state.settings, len(seconds), "text_2")
    params = score_params(body, state.engine.facts)
    path = route_path(request.scope)
    firsts, firsts_cut = await state.first_tokens(path, firsts, body.max_tokens_per_query)
    seconds, seconds_cut = await state.first_tokens(path, seconds, body.max_tokens_per_doc)
    text_1 = firsts[0] if isinstance(body.text_1, str) else firsts
    text_2 = seconds[0] if isinstance(body.text_2, str) else seconds
    variables = body.template_variables()
    outputs = await state.run_engine(
        path, len(seconds), state.engine.ascore, text_1, text_2, params, template_variables=variables
    )
    tokens = sum(out.num_tokens for out in outputs)
    report_truncated(response, outputs, pairs_cut(firsts_cut, seconds_cut))
    return ScoreResponse(
        id=new_id("score", body.request_id),
        created=now(),
        model=state.settings.model_name,
        data=[ScoreData(index=i, score=out.outputs.score) for i, out in enumerate(outputs)],
        usage=Usage(prompt_tokens=tokens, total_tokens=tokens),
    )


for _path in ("/score", "/v1/score"):
    router.add_api_route(
        _path,
        score_pairs,
        methods=["POST"],
        response_model=ScoreResponse,
        responses=ENGINE_ERRORS,
        name=f"score{_path.replace('/', '_')}",
        summary="Score text pairs",
    )
