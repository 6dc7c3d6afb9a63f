"""``POST /tokenize``: the token ids the model would read, for clients that budget context length."""

from __future__ import annotations

from fastapi import APIRouter, Request

from poolrag.server.inputs import refuse_blank
from poolrag.server.openapi import ENGINE_ERRORS
from poolrag.server.routing import OffLoopRoute
from poolrag.server.schemas import TokenizeRequest, TokenizeResponse
from poolrag.server.state import model_state
from poolrag.server.token_cap import tokenize_within_cap

router = APIRouter(tags=["tokenization"], route_class=OffLoopRoute)
PATH = "/tokenize"


@router.post(PATH, response_model=TokenizeResponse, response_model_exclude_none=True, responses=ENGINE_ERRORS)
async def tokenize(body: TokenizeRequest, request: Request) -> TokenizeResponse:
    state = model_state(request, body.model)
    refuse_blank(body.prompt, "prompt")
    engine = state.engine
    (tokens,) = await state.run_blocking(
        PATH,
        tokenize_within_cap,
        engine.tokenizer,
        lambda text: engine.tokenize(text, body.add_special_tokens),
        [body.prompt],
        state.limits.max_request_tokens,
        "prompt",
        body.add_special_tokens,
    )
    state.metrics.prompt_tokens.labels(state.name, PATH).inc(len(tokens))
    return TokenizeResponse(
        count=len(tokens),
        max_model_len=engine.facts.max_model_len,
        tokens=tokens,
        token_strs=engine.tokenizer.convert_ids_to_tokens(tokens) if body.return_token_strs else None,
    )
