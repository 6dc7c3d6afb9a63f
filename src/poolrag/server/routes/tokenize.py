"""``POST /tokenize``: the token ids the model would read, for clients that budget context length.

vLLM's body names ``prompt``; a body naming ``inputs`` is Text Embeddings Inference's, answered in
TEI's shape (:mod:`poolrag.server.routes.tei_tokenize`). ``POST /detokenize`` is vLLM's way back
(TEI's is ``/decode``).
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from poolrag.server.openapi import ENGINE_ERRORS
from poolrag.server.routes.tei_tokenize import decoded_texts, tei_tokenize
from poolrag.server.schemas import (
    DetokenizeRequest,
    DetokenizeResponse,
    TokenizeRequest,
    TokenizeResponse,
)
from poolrag.server.state import model_state
from poolrag.server.tei_routing import TeiRoute, with_tei_errors
from poolrag.server.tei_schemas import TeiTokenizeRequest, TeiTokenizeResponse, TokenizeBody
from poolrag.server.token_cap import tokenize_within_cap
from poolrag.tokenization.input_processor import checked_texts
from poolrag.tokenization.tokenizer_lock import call_tokenizer

router = APIRouter(tags=["tokenization"], route_class=TeiRoute)
PATH = "/tokenize"


async def tokenize(body: TokenizeRequest, request: Request) -> JSONResponse:
    """vLLM's answer, ``"token_strs": null`` included when not asked for, as vLLM writes it."""
    state = model_state(request, body.model)
    engine = state.engine
    prompt = checked_texts([body.prompt], "prompt", one=True)  # before a long text is counted
    (tokens,) = await state.run_blocking(
        PATH,
        tokenize_within_cap,
        engine.tokenizer,
        lambda text: list(
            call_tokenizer(engine.tokenizer, text, add_special_tokens=body.add_special_tokens)["input_ids"]
        ),
        prompt,
        state.limits.max_request_tokens,
        "prompt",
        body.add_special_tokens,
    )
    state.metrics.prompt_tokens.labels(state.name, PATH).inc(len(tokens))
    answer = TokenizeResponse(
        count=len(tokens),
        max_model_len=engine.facts.max_model_len,
        tokens=tokens,
        token_strs=engine.tokenizer.convert_ids_to_tokens(tokens) if body.return_token_strs else None,
    )
    return JSONResponse(answer.model_dump())


@router.post(
    PATH,
    response_model=TokenizeResponse | TeiTokenizeResponse,
    response_model_exclude_none=True,
    responses=with_tei_errors(ENGINE_ERRORS),
)
async def tokenize_in_dialect(body: TokenizeBody, request: Request) -> TokenizeResponse | Response:
    """vLLM's body (``prompt``) or TEI's (``inputs``), each answered in its own shape."""
    if isinstance(body.root, TeiTokenizeRequest):
        return await tei_tokenize(body.root, request)
    return await tokenize(body.root, request)


@router.post("/detokenize", response_model=DetokenizeResponse, responses=ENGINE_ERRORS)
async def detokenize(body: DetokenizeRequest, request: Request) -> DetokenizeResponse:
    state = model_state(request, body.model)
    (text,) = await state.run_blocking(
        "/detokenize", decoded_texts, state.engine.tokenizer, [body.tokens], False, "tokens"
    )
    return DetokenizeResponse(prompt=text)
