"""``POST /embed`` and ``/embed_all``: Text Embeddings Inference's dense routes.

``/embed`` answers one vector per input as a bare list of lists, L2-normalised unless
``normalize`` is false (TEI's default, whatever the model folder says), cut to ``dimensions`` for
any model, as TEI cuts; ``/embed_all`` one row per
token (special tokens included), as the model outputs them, never normalised.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from poolrag.model_facts import PoolingTask
from poolrag.outputs import PoolingOutput, PoolingRequestOutput
from poolrag.params import PoolingParams, check_dimensions_range
from poolrag.pooling.matryoshka import truncate
from poolrag.server.answer_size import check_answer_values
from poolrag.server.float_json import FloatRows, JsonAnswer
from poolrag.server.inputs import fields_named, input_count, to_prompts
from poolrag.server.scope_path import route_path
from poolrag.server.state import model_state
from poolrag.server.tei_inputs import tei_truncate
from poolrag.server.tei_routing import TEI_ERRORS, TeiRoute
from poolrag.server.tei_schemas import (
    TeiEmbedAllRequest,
    TeiEmbedAllResponse,
    TeiEmbedRequest,
    TeiEmbedResponse,
    TeiEmbedSparseRequest,
)
from poolrag.server.truncation_report import report_truncated

router = APIRouter(tags=["text-embeddings-inference"], route_class=TeiRoute)


@router.post("/embed", response_model=TeiEmbedResponse, responses=TEI_ERRORS)
async def embed(body: TeiEmbedRequest, request: Request, response: Response) -> JsonAnswer:
    state = model_state(request, body.model)
    prompts = to_prompts(body.inputs, state.settings, param="inputs")
    cut = body.dimensions  # any model's vector is cut, as TEI cuts (only the range is checked)
    if cut is not None and state.engine.facts.embedding_dim is not None:  # else refused as no embedder
        check_dimensions_range(cut, state.engine.facts.embedding_dim)
    params = PoolingParams(
        # a cut vector is asked for whole and raw, and cut then normalised here, as TEI does
        dimensions=state.engine.facts.embedding_dim if cut is not None else None,
        normalize=body.normalize and cut is None,
        truncate=tei_truncate(body),
        prompt_name=body.prompt_name,
    )
    params.verify("embed", state.engine.facts)  # refused before the request takes a slot
    with fields_named(input="inputs"):
        outputs = await state.run_engine(
            route_path(request.scope), input_count(prompts), state.engine.aembed, prompts, params
        )
    report_truncated(response, outputs)
    vectors = [out.outputs.embedding for out in outputs]
    if cut is not None:
        vectors = [truncate(v, cut, body.normalize) for v in vectors]
    rows = [FloatRows(v) for v in vectors]
    return JsonAnswer(rows, values=sum(len(row) for row in rows))  # TeiEmbedResponse's JSON


async def tei_arrays(
    body: TeiEmbedAllRequest | TeiEmbedSparseRequest,
    request: Request,
    response: Response,
    task: PoolingTask,
    normalize: bool | None = None,
) -> tuple[list[PoolingRequestOutput[PoolingOutput]], int]:
    """The engine's ``task`` array of each input (``/embed_all``'s rows, ``/embed_sparse``'s
    weights) and how many values they hold, at most ``--max-answer-values``."""
    state = model_state(request, body.model)
    prompts = to_prompts(body.inputs, state.settings, param="inputs")
    params = PoolingParams(normalize=normalize, truncate=tei_truncate(body), prompt_name=body.prompt_name)
    params.verify(task, state.engine.facts)  # refused before the request takes a slot
    with fields_named(input="inputs"):
        outputs = await state.run_engine(
            route_path(request.scope), input_count(prompts), state.engine.aencode, prompts, task, params
        )
    values = sum(out.outputs.data.size for out in outputs)
    check_answer_values(values, state.limits)
    report_truncated(response, outputs)
    return outputs, values


@router.post("/embed_all", response_model=TeiEmbedAllResponse, responses=TEI_ERRORS)
async def embed_all(body: TeiEmbedAllRequest, request: Request, response: Response) -> JsonAnswer:
    outputs, values = await tei_arrays(body, request, response, "token_embed", normalize=False)
    rows = [FloatRows(out.outputs.data) for out in outputs]
    return JsonAnswer(rows, values=values)  # TeiEmbedAllResponse's JSON
