"""``POST /v1/embeddings``: OpenAI's embeddings API."""

from __future__ import annotations

import base64

import numpy as np
from fastapi import APIRouter, Request

from poolrag.params import PoolingParams
from poolrag.server.inputs import to_prompts
from poolrag.server.openapi import ENGINE_ERRORS
from poolrag.server.routing import OffLoopRoute
from poolrag.server.schemas import EmbeddingData, EmbeddingRequest, EmbeddingResponse, Usage
from poolrag.server.state import new_id, now, server_state

router = APIRouter(tags=["embeddings"], route_class=OffLoopRoute)
PATH = "/v1/embeddings"


def encode_vector(vector: np.ndarray, encoding_format: str) -> list[float] | str:
    """A float list, or OpenAI's base64 of the little-endian float32 bytes."""
    if encoding_format == "base64":
        return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")
    return vector.tolist()


@router.post(PATH, response_model=EmbeddingResponse, responses=ENGINE_ERRORS)
async def create_embeddings(body: EmbeddingRequest, request: Request) -> EmbeddingResponse:
    state = server_state(request)
    state.check_model(body.model)
    prompts = to_prompts(body.input, state.settings)
    params = PoolingParams(
        dimensions=body.dimensions,
        truncate_prompt_tokens=body.truncate_prompt_tokens,
        input_type=body.input_type,
    )
    params.verify("embed", state.engine.facts)  # refused before the request takes a slot
    outputs = await state.run_engine(PATH, "embed", len(prompts), prompts, params)
    tokens = sum(out.num_tokens for out in outputs)
    data = [
        EmbeddingData(index=i, embedding=encode_vector(out.outputs.embedding, body.encoding_format))
        for i, out in enumerate(outputs)
    ]
    return EmbeddingResponse(
        id=new_id("embd"),
        created=now(),
        model=state.settings.model_name,
        data=data,
        usage=Usage(prompt_tokens=tokens, total_tokens=tokens),
    )
