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

from poolrag.params import PoolingParams
from poolrag.server.answer_size import check_answer_values
from poolrag.server.inputs import fields_named, input_count, to_prompts
from poolrag.server.routes.pooling import sparse_entries
from poolrag.server.scope_path import route_path
from poolrag.server.state import model_state
from poolrag.server.tei_inputs import tei_truncate
from poolrag.server.tei_routing import TEI_ERRORS, TeiRoute
from poolrag.server.tei_schemas import TeiEmbedSparseRequest, TeiEmbedSparseResponse
from poolrag.server.truncation_report import report_truncated

router = APIRouter(tags=["text-embeddings-inference"], route_class=TeiRoute)
PATH = "/embed_sparse"


@router.post(PATH, response_model=TeiEmbedSparseResponse, responses=TEI_ERRORS)
async def embed_sparse(
    body: TeiEmbedSparseRequest, request: Request, response: Response
) -> TeiEmbedSparseResponse:
    state = model_state(request, body.model)
    prompts = to_prompts(body.inputs, state.settings, param="inputs")
    params = PoolingParams(truncate=tei_truncate(body), prompt_name=body.prompt_name)
    params.verify("sparse_embed", state.engine.facts)  # refused before the request takes a slot
    with fields_named(input="inputs"):
        outputs = await state.run_engine(
            route_path(request.scope),
            input_count(prompts),
            state.engine.aencode,
            prompts,
            "sparse_embed",
            params,
        )
    check_answer_values(sum(out.outputs.data.size for out in outputs), state.limits)  # one per weight
    report_truncated(response, outputs)
    return TeiEmbedSparseResponse([sparse_entries(out.outputs.data) for out in outputs])
