"""``POST /v1/embeddings``: OpenAI's embeddings API (also at ``/embeddings``, as TEI and infinity
serve it: LangChain's ``InfinityEmbeddings`` given the bare host posts there)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from fastapi import APIRouter, Request, Response

from poolrag.errors import InvalidInputError, at_position
from poolrag.image_inputs import text_only
from poolrag.params import PoolingParams
from poolrag.postprocess.vector_precision import quantize_vectors
from poolrag.server.bytes_answer import BYTES_ANSWER_DOC, BYTES_FORMATS, bytes_answer
from poolrag.server.errors import APIError
from poolrag.server.float_json import FloatRows, JsonAnswer
from poolrag.server.inputs import chat_prompt, check_input_count, input_count, messages_named, to_prompts
from poolrag.server.jina_embeddings import jina_task_prompt, joined_with_spans
from poolrag.server.openapi import ENGINE_ERRORS
from poolrag.server.routing import OffLoopRoute
from poolrag.server.schemas import EmbeddingRequest, EmbeddingResponse, LateChunking, Usage
from poolrag.server.state import ServerState, model_state, new_id, now
from poolrag.server.truncation_report import TRUNCATED_INPUTS_HEADER, report_truncated
from poolrag.server.wire_dtypes import wire_base64
from poolrag.text_validity import check_texts

router = APIRouter(tags=["embeddings"], route_class=OffLoopRoute)
PATH = "/v1/embeddings"


#: ``embedding_answer``'s wire for vectors already packed into integers (Jina's binary / ubinary)
BITS = ("bits", "int", "native")


def encode_vector(
    vector: np.ndarray, encoding_format: str, embed_dtype: str = "float32", endianness: str = "native"
) -> FloatRows | str | list[int]:
    """Base64 of the vector's bytes in ``embed_dtype`` and byte order (OpenAI's default: little-endian
    float32), packed bits as integers (:data:`BITS`), or the values as a float64 row (written as a
    float list): as in vLLM, ``embed_dtype`` and ``endianness`` shape bytes only, never floats."""
    if encoding_format == "base64":
        return wire_base64(vector, embed_dtype, endianness)
    if encoding_format == "bits":
        return vector.tolist()
    return FloatRows(vector)


@router.post(PATH, response_model=EmbeddingResponse, responses={**ENGINE_ERRORS, 200: BYTES_ANSWER_DOC})
@router.post("/embeddings", response_model=EmbeddingResponse, include_in_schema=False)  # TEI's, infinity's
async def create_embeddings(
    body: EmbeddingRequest, request: Request, response: Response
) -> JsonAnswer | Response:
    state = model_state(request, body.model)
    prompts = _prompts(body, state)
    input_type, prompt_name = jina_task_prompt(body.task, state.engine.facts)
    params = PoolingParams(
        dimensions=body.dimensions,
        normalize=body.normalize if body.normalize is not None else body.normalized,
        use_activation=body.use_activation,
        truncate_prompt_tokens=body.cut_for(state.engine.facts),
        truncate=body.truncate,
        input_type=body.input_type or input_type,
        prompt=body.prompt,
        prompt_name=body.prompt_name or prompt_name,
    )
    params.verify("embed", state.engine.facts)  # refused before the request takes a slot
    if body.late_chunking:
        answer = await _late_chunks(body, params, state)
        response.headers[TRUNCATED_INPUTS_HEADER] = "0"  # a late-chunked document is read whole
        return answer
    with messages_named(body):
        outputs = await state.run_engine(PATH, input_count(prompts), state.engine.aembed, prompts, params)
    tokens = sum(out.num_tokens for out in outputs)
    report_truncated(response, outputs)
    return _answer(body, state, [out.outputs.embedding for out in outputs], tokens)


def _prompts(body: EmbeddingRequest, state: ServerState) -> Any:
    if body.image_items and not state.engine.facts.reads_images:  # else its data URL is read as text
        raise text_only(f"input[{body.image_items[0]}]")
    if body.messages is None:
        return to_prompts(body.input, state.settings)  # type: ignore[arg-type]
    return chat_prompt(body, state.engine.facts)


def _answer(
    body: EmbeddingRequest, state: ServerState, vectors: Sequence[np.ndarray], tokens: int
) -> JsonAnswer | Response:
    """The vectors as OpenAI's JSON (float lists or base64), or as vLLM's ``bytes`` answer."""
    answer_id = new_id("embd", body.request_id)
    usage = Usage(prompt_tokens=tokens, total_tokens=tokens)
    if body.encoding_format in BYTES_FORMATS:
        return bytes_answer(vectors, body, answer_id, state.settings.model_name, usage.model_dump())
    if body.embedding_type in ("binary", "ubinary"):  # Jina's packed bits
        bits = quantize_vectors(np.stack(vectors), body.embedding_type) if vectors else []
        return embedding_answer(answer_id, now(), state.settings.model_name, list(bits), usage, BITS)
    encoding = body.embedding_type or body.encoding_format  # Jina's float / base64 are OpenAI's
    wire = (encoding, body.embed_dtype, body.endianness)
    return embedding_answer(answer_id, now(), state.settings.model_name, vectors, usage, wire)


def embedding_answer(
    answer_id: str,
    created: int,
    model: str,
    vectors: Sequence[np.ndarray],
    usage: Usage,
    wire: tuple[str, str, str] = ("float", "float32", "native"),
) -> JsonAnswer:
    """:class:`~poolrag.server.schemas.EmbeddingResponse`'s JSON, built without validating each float
    (the route encodes it off the loop)."""
    data = [
        {"object": "embedding", "index": i, "embedding": encode_vector(v, *wire)}
        for i, v in enumerate(vectors)
    ]
    content = {"id": answer_id, "object": "list", "created": created, "model": model, "data": data}
    content["usage"] = usage.model_dump()
    return JsonAnswer(content, values=sum(len(v) for v in vectors))


async def _late_chunks(
    body: EmbeddingRequest, params: PoolingParams, state: ServerState
) -> JsonAnswer | Response:
    """``late_chunking``: ``input`` is one document, ``data`` one vector per span in order; or
    Jina's ``true``: the texts of ``input`` joined by spaces, one vector per text."""
    if body.late_chunking is True:  # each text named as itself (input[1] is empty), not as a span
        document, spans = joined_with_spans(check_texts(body.input, "input"))  # type: ignore[arg-type]
    else:
        assert isinstance(body.late_chunking, LateChunking)
        if not isinstance(body.input, str):
            raise APIError(400, "late_chunking takes one document: input must be a string", param="input")
        document, spans = body.input, [tuple(span) for span in body.late_chunking.spans]
        check_input_count(state.settings, len(spans), "late_chunking.spans")  # one vector each, as inputs are
    run = state.calls.embed_chunks
    try:
        vectors, tokens = await state.run_engine(PATH, len(spans), run, document, spans, params)
    except InvalidInputError as exc:  # Jina's client sent texts, not spans: spans[1] is its input[1]
        if body.late_chunking is not True:
            raise
        raise at_position(exc, [f"input[{i}]" for i in range(len(spans))]) from None
    return _answer(body, state, list(vectors), tokens)
