"""``POST /v1/embeddings``: OpenAI's embeddings API."""

from __future__ import annotations

import base64

import numpy as np
from fastapi import APIRouter, Request

from poolrag.params import PoolingParams
from poolrag.server.errors import APIError
from poolrag.server.inputs import to_prompts
from poolrag.server.openapi import ENGINE_ERRORS
from poolrag.server.routing import OffLoopRoute
from poolrag.server.schemas import EmbeddingData, EmbeddingRequest, EmbeddingResponse, Usage
from poolrag.server.state import ServerState, model_state, new_id, now

router = APIRouter(tags=["embeddings"], route_class=OffLoopRoute)
PATH = "/v1/embeddings"


_BYTE_ORDERS = {"native": "<", "little": "<", "big": ">"}  # "native": x86-64 and ARM servers are little


def _bfloat16_bits(vector: np.ndarray) -> np.ndarray:
    """bfloat16 has no numpy dtype: its bit patterns (the top half of float32, rounded to nearest even)."""
    bits = np.ascontiguousarray(vector, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def _in_dtype(vector: np.ndarray, embed_dtype: str) -> np.ndarray:
    if embed_dtype == "bfloat16":
        return _bfloat16_bits(vector)
    return np.asarray(vector, dtype=np.float16 if embed_dtype == "float16" else np.float32)


def encode_vector(
    vector: np.ndarray, encoding_format: str, embed_dtype: str = "float32", endianness: str = "native"
) -> list[float] | str:
    """Base64 of the vector's bytes in ``embed_dtype`` and byte order (OpenAI's default: little-endian
    float32), or a float list of the values rounded to ``embed_dtype``."""
    values = _in_dtype(vector, embed_dtype)
    if encoding_format == "base64":
        wire = values.astype(values.dtype.newbyteorder(_BYTE_ORDERS[endianness]))
        return base64.b64encode(wire.tobytes()).decode("ascii")
    if embed_dtype == "bfloat16":
        return (values.astype(np.uint32) << 16).view(np.float32).tolist()
    return values.astype(np.float32).tolist()


def _normalize(body: EmbeddingRequest) -> bool | None:
    """``normalize`` or vLLM's newer ``use_activation`` (the same switch on embeddings)."""
    if (
        body.normalize is not None
        and body.use_activation is not None
        and body.normalize != body.use_activation
    ):
        raise APIError(
            400,
            "normalize and use_activation disagree; on embeddings they are the same switch, send one",
            param="use_activation",
            code="invalid_request",
        )
    return body.normalize if body.normalize is not None else body.use_activation


@router.post(PATH, response_model=EmbeddingResponse, responses=ENGINE_ERRORS)
async def create_embeddings(body: EmbeddingRequest, request: Request) -> EmbeddingResponse:
    state = model_state(request, body.model)
    prompts = to_prompts(body.input, state.settings)
    params = PoolingParams(
        dimensions=body.dimensions,
        normalize=_normalize(body),
        truncate_prompt_tokens=body.truncate_prompt_tokens,
        input_type=body.input_type,
    )
    params.verify("embed", state.engine.facts)  # refused before the request takes a slot
    if body.late_chunking is not None:
        return await _late_chunks(body, params, state)
    outputs = await state.run_engine(PATH, len(prompts), state.calls.embed, prompts, params)
    tokens = sum(out.num_tokens for out in outputs)
    wire = (body.encoding_format, body.embed_dtype, body.endianness)
    data = [
        EmbeddingData(index=i, embedding=encode_vector(out.outputs.embedding, *wire))
        for i, out in enumerate(outputs)
    ]
    return EmbeddingResponse(
        id=new_id("embd", body.request_id),
        created=now(),
        model=state.settings.model_name,
        data=data,
        usage=Usage(prompt_tokens=tokens, total_tokens=tokens),
    )


async def _late_chunks(
    body: EmbeddingRequest, params: PoolingParams, state: ServerState
) -> EmbeddingResponse:
    """``late_chunking``: ``input`` is one document, ``data`` one vector per span in order."""
    assert body.late_chunking is not None
    if not isinstance(body.input, str):
        raise APIError(400, "late_chunking takes one document: input must be a string", param="input")
    spans = list(body.late_chunking.spans)
    vectors, tokens = await state.run_engine(
        PATH, len(spans), state.calls.embed_chunks, body.input, spans, params
    )
    wire = (body.encoding_format, body.embed_dtype, body.endianness)
    return EmbeddingResponse(
        id=new_id("embd", body.request_id),
        created=now(),
        model=state.settings.model_name,
        data=[EmbeddingData(index=i, embedding=encode_vector(v, *wire)) for i, v in enumerate(vectors)],
        usage=Usage(prompt_tokens=tokens, total_tokens=tokens),
    )
