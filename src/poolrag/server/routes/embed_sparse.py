"""``POST /embed_sparse``: Hugging Face Text Embeddings Inference's sparse route.

``{"inputs": str | [str], "truncate": bool}`` → one list of ``{"index": token id, "value": weight}``
per input (non-zero weights, sorted by token id), so TEI clients and hybrid-search tools that speak
TEI work unchanged against a SPLADE or BGE-M3 model served by poolrag; a model without sparse
weights answers TEI's 424. ``truncate`` unset: the server's default (truncate, unless
``--no-auto-truncate``). A SPLADE vector may weigh every word of the vocabulary, so the weights
count against ``--max-answer-values`` as ``/pooling``'s do. Errors are TEI's
(:mod:`poolrag.server.tei_errors`).
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from poolrag.server.routes.pooling import sparse_entries
from poolrag.server.routes.tei_embed import tei_arrays
from poolrag.server.tei_routing import TEI_ERRORS, TeiRoute
from poolrag.server.tei_schemas import TeiEmbedSparseRequest, TeiEmbedSparseResponse

router = APIRouter(tags=["text-embeddings-inference"], route_class=TeiRoute)
PATH = "/embed_sparse"


@router.post(PATH, response_model=TeiEmbedSparseResponse, responses=TEI_ERRORS)
async def embed_sparse(
    body: TeiEmbedSparseRequest, request: Request, response: Response
) -> TeiEmbedSparseResponse:
    outputs, _ = await tei_arrays(body, request, response, "sparse_embed")  # weights count as values
    return TeiEmbedSparseResponse([sparse_entries(out.outputs.data) for out in outputs])
