"""``/tokenize`` in Text Embeddings Inference's dialect (a body with ``inputs``; the path's vLLM
dialect with ``prompt`` is :mod:`poolrag.server.routes.tokenize`), and ``POST /decode``.

Each token comes back as TEI writes it: ``{id, text, special, start, stop}``, where ``start`` and
``stop`` are UTF-8 byte offsets into the input (the instruction prompt put before it included, with
``prompt_name``) and a special token has its own string and no offsets. The texts are held to the
per-request token cap as the vLLM dialect is (:mod:`poolrag.server.token_cap`).
"""

from __future__ import annotations

from itertools import accumulate
from typing import Any

from fastapi import APIRouter, Request, Response

from poolrag.server.errors import APIError
from poolrag.server.inputs import check_input_count
from poolrag.server.scope_path import route_path
from poolrag.server.state import model_state
from poolrag.server.tei_routing import TEI_ERRORS, TeiRoute
from poolrag.server.tei_schemas import (
    TeiDecodeRequest,
    TeiDecodeResponse,
    TeiToken,
    TeiTokenizeRequest,
    TeiTokenizeResponse,
)
from poolrag.server.token_cap import tokenize_within_cap
from poolrag.tokenization.input_processor import checked_texts
from poolrag.tokenization.tokenizer_lock import call_tokenizer

router = APIRouter(tags=["text-embeddings-inference"], route_class=TeiRoute)


def _byte_offsets(text: str) -> list[int]:
    """The UTF-8 byte offset of each character position of ``text`` (one past the end included)."""
    if text.isascii():
        return list(range(len(text) + 1))
    return [0, *accumulate(len(ch.encode("utf-8", "surrogatepass")) for ch in text)]


def _tokens(tokenizer: Any, text: str, add_special_tokens: bool) -> list[TeiToken]:
    fast = getattr(tokenizer, "is_fast", False)  # only a fast tokenizer knows its offsets
    encoded = call_tokenizer(
        tokenizer,
        text,
        add_special_tokens=add_special_tokens,
        return_offsets_mapping=fast,
        return_special_tokens_mask=True,
    )
    ids = encoded["input_ids"]
    strings = tokenizer.convert_ids_to_tokens(ids)
    offsets = encoded["offset_mapping"] if fast else [None] * len(ids)
    at = _byte_offsets(text) if fast else []
    tokens = []
    for token_id, string, special, span in zip(
        ids, strings, encoded["special_tokens_mask"], offsets, strict=True
    ):
        if special or span is None:
            tokens.append(TeiToken(id=token_id, text=string, special=bool(special), start=None, stop=None))
        else:
            start, stop = span
            tokens.append(
                TeiToken(id=token_id, text=text[start:stop], special=False, start=at[start], stop=at[stop])
            )
    return tokens


def _tokenized(tokenizer: Any, texts: list[str], add_special_tokens: bool, limit: int) -> tuple[bytes, int]:
    """Every text's tokens as TEI's JSON (its nulls kept), within the per-request token cap, and
    how many there are."""
    answers = tokenize_within_cap(
        tokenizer,
        lambda text: _tokens(tokenizer, text, add_special_tokens),
        texts,
        limit,
        "inputs",
        add_special_tokens,
    )
    return TeiTokenizeResponse(answers).model_dump_json().encode(), sum(len(one) for one in answers)


async def tei_tokenize(body: TeiTokenizeRequest, request: Request) -> Response:
    state = model_state(request, body.model)
    texts = [body.inputs] if isinstance(body.inputs, str) else list(body.inputs)
    check_input_count(state.settings, len(texts), "inputs")
    texts = checked_texts(texts, "inputs", one=isinstance(body.inputs, str))  # before any is counted
    engine = state.engine
    if body.prompt_name is not None:
        if body.prompt_name not in engine.facts.prompt_names:
            known = ", ".join(repr(n) for n in engine.facts.prompt_names) or "none"
            raise APIError(
                400,
                f"prompt_name {body.prompt_name!r} is not one of this model's prompts ({known})",
                param="prompt_name",
            )
        prompt = engine.spec.prompts[body.prompt_name]  # type: ignore[attr-defined]
        texts = [prompt + text for text in texts]
    path = route_path(request.scope)
    answer, count = await state.run_blocking(
        path, _tokenized, engine.tokenizer, texts, body.add_special_tokens, state.limits.max_request_tokens
    )
    state.metrics.prompt_tokens.labels(state.name, path).inc(count)
    return Response(answer, media_type="application/json")


def decoded_texts(
    tokenizer: Any, ids: list[list[int]], skip_special_tokens: bool, field: str = "ids"
) -> list[str]:
    """Each row of ids as text; a 400 naming the row (``field[i]``) that holds no token of the model."""
    size = len(tokenizer)
    for i, row in enumerate(ids):
        unknown = next((t for t in row if t >= size), None)
        if unknown is not None:
            message = f"{field}[{i}] holds {unknown}, not a token id of this model (0..{size - 1})"
            raise APIError(400, message, param=field)
    return list(tokenizer.batch_decode(ids, skip_special_tokens=skip_special_tokens))


@router.post("/decode", response_model=TeiDecodeResponse, responses=TEI_ERRORS)
async def decode(body: TeiDecodeRequest, request: Request) -> TeiDecodeResponse:
    state = model_state(request, body.model)
    one = not body.ids or isinstance(body.ids[0], int)
    rows: list[list[int]] = [body.ids] if one else body.ids  # type: ignore[list-item]
    if not all(rows):  # TEI's Empty error: it decodes nothing from no ids
        raise APIError(400, "`input_ids` cannot be empty", param="ids", code="empty_input")
    check_input_count(state.settings, len(rows), "ids")
    tokenizer = state.engine.tokenizer
    texts = await state.run_blocking(
        route_path(request.scope), decoded_texts, tokenizer, rows, body.skip_special_tokens
    )
    return TeiDecodeResponse(texts)
