"""``POST /embed_sparse``: Hugging Face Text Embeddings Inference's sparse route.

``{"inputs": str | [str], "truncate": bool}`` → one list of ``{"index": token id, "value": weight}``
per input (non-zero weights, sorted by token id), so TEI clients and hybrid-search tools that speak
TEI work unchanged against a SPLADE or BGE-M3 model served by poolrag. ``truncate`` unset: the
server's default (truncate, unless ``--no-auto-truncate``).
"""

from __future__ import annotations

from fastapi import APIRouter, Request

from poolrag.params import PoolingParams
from poolrag.server.inputs import to_prompts
from poolrag.server.openapi import ENGINE_ERRORS
from poolrag.server.routes.pooling import sparse_entries
from poolrag.server.routing import OffLoopRoute
from poolrag.server.schemas import EmbedSparseRequest, EmbedSparseResponse
from poolrag.server.state import model_state

router = APIRouter(tags=["pooling"], route_class=OffLoopRoute)
PATH = "/embed_sparse"


@router.post(PATH, response_model=EmbedSparseResponse, responses=ENGINE_ERRORS)
async def embed_sparse(body: EmbedSparseRequest, request: Request) -> EmbedSparseResponse:
    state = model_state(request, body.model)
    prompts = to_prompts(body.inputs, state.settings, param="inputs")
    params = PoolingParams(truncate=body.truncate)
    params.verify("sparse_embed", state.engine.facts)  # refused before the request takes a slot
    outputs = await state.run_engine(PATH, len(prompts), state.calls.encode, prompts, "sparse_embed", params)
    return EmbedSparseResponse([sparse_entries(out.outputs.data) for out in outputs])
