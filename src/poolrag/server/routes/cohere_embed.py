"""``POST /v2/embed`` and ``/v1/embed``: Cohere's embed API, so the ``cohere`` client works with
``base_url=`` unchanged (``ClientV2``, and ``Client``, which langchain-cohere's ``CohereEmbeddings``
builds). v1 answers a request without ``embedding_types`` as a bare list of floats, as Cohere does.

Compact types (int8, uint8, binary, ubinary) come from the same function ``Engine`` callers use
(:mod:`poolrag.postprocess.vector_precision`), so a store fed from either gets the same bytes.
int8/uint8 are scaled by the request's ``calibration`` set, else the server's ranges file
(``--calibration``) or the model's own, else the batch itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from fastapi import APIRouter, Request, Response

from poolrag.errors import DimensionsError, InputTooLongError, InvalidInputError, served_here
from poolrag.model_facts import ModelFacts, task_runners
from poolrag.outputs import EmbeddingOutput, PoolingRequestOutput
from poolrag.params import PoolingParams
from poolrag.postprocess.quantization_ranges import QuantizationRanges
from poolrag.postprocess.vector_precision import check_calibration, quantize_vectors
from poolrag.server.cohere_schemas import (
    CohereBilledUnits,
    CohereEmbedRequest,
    CohereEmbedResponse,
    CohereFloatsResponse,
    CohereMeta,
)
from poolrag.server.errors import APIError
from poolrag.server.inputs import check_input_count, fields_named
from poolrag.server.openapi import ENGINE_ERRORS
from poolrag.server.routing import OffLoopRoute
from poolrag.server.state import ServedModels, ServerState, model_state, new_id, served_models
from poolrag.server.truncation_report import report_truncated
from poolrag.server.wire_dtypes import wire_base64
from poolrag.tokenization.input_processor import role_prompt_names

router = APIRouter(tags=["embeddings"], route_class=OffLoopRoute)
PATH = "/v2/embed"
V1_PATH = "/v1/embed"

_INPUT_TYPES = {"search_query": "query", "search_document": "document"}
#: Cohere's ``truncate`` as poolrag's: END keeps the first tokens, NONE refuses, unset: the server's.
_TRUNCATE = {"END": True, "NONE": False, None: None}


def _prompt_name(input_type: str | None, facts: ModelFacts) -> str | None:
    """Cohere's ``classification`` / ``clustering`` as the folder's prompt of that name (nomic's
    ``classification``, EmbeddingGemma's ``Classification``); without one, the model's default."""
    if input_type not in ("classification", "clustering"):
        return None
    return next((n for n in facts.prompt_names if n.lower() == input_type), None)


def _input_type(body: CohereEmbedRequest, facts: ModelFacts) -> str | None:
    """The role ``input_type`` names. Cohere's v3+ models refuse a request without one, as their
    vectors depend on it; so does a model here with a query or document prompt, rather than embed a
    query as a document. A model without such prompts embeds a text alike either way."""
    if body.input_type is None:
        roles = sorted(role_prompt_names(facts.prompt_names))
        if roles:
            raise APIError(
                400,
                f"input_type is required: this model embeds queries and documents differently (its "
                f"prompts {', '.join(roles)}); send search_query for queries, search_document for "
                "documents, or classification / clustering",
                param="input_type",
            )
        return "document"
    return _INPUT_TYPES.get(body.input_type)


def _params(body: CohereEmbedRequest, facts: ModelFacts) -> PoolingParams:
    if body.truncate == "START":
        raise APIError(
            400,
            "truncate START is not supported: poolrag keeps a long text's first tokens (END) "
            "or refuses it (NONE)",
            param="truncate",
        )
    return PoolingParams(  # under NONE, max_tokens is a limit to refuse at (_refuse_over_max_tokens)
        dimensions=body.output_dimension,
        truncate_prompt_tokens=None if body.truncate == "NONE" else body.max_tokens,
        truncate=_TRUNCATE[body.truncate],
        input_type=_input_type(body, facts),
        prompt_name=_prompt_name(body.input_type, facts),
    )


def _calibration(body: CohereEmbedRequest) -> np.ndarray | None:
    """The calibration vectors as one matrix, refused before the model runs if they cannot scale
    anything (:func:`~poolrag.postprocess.vector_precision.check_calibration`)."""
    if body.calibration is None:
        return None
    try:
        return check_calibration(body.calibration)
    except InvalidInputError as exc:
        raise APIError(400, str(exc), param="calibration") from exc


def _by_type(
    vectors: np.ndarray, types: list[str], calibration: np.ndarray | None, ranges: QuantizationRanges | None
) -> dict[str, list[list[float]] | list[list[int]]]:
    try:
        return {  # Cohere's base64: each vector's float32 bytes, little-endian
            kind: [wire_base64(row, "float32", "little") for row in vectors]
            if kind == "base64"
            else quantize_vectors(vectors, kind, calibration=calibration, ranges=ranges).tolist()
            for kind in dict.fromkeys(types)
        }
    except InvalidInputError as exc:
        raise APIError(400, str(exc), param="calibration") from exc


def _check_scalable(body: CohereEmbedRequest, ranges: QuantizationRanges | None) -> None:
    """int8/uint8 need a scale per dimension: the request's calibration set, the server's (or the
    model's) ranges file, or a batch of two or more texts; refused before the model runs."""
    if ranges is not None or body.calibration is not None or len(body.items) >= 2:
        return
    if {"int8", "uint8"} & set(body.types):
        raise APIError(
            400,
            f"calibration: int8/uint8 of a single {'image' if body.has_images else 'text'} needs fixed "
            "ranges: send calibration vectors, or start the server with --calibration FILE (made by "
            "'poolrag calibrate')",
            param="calibration",
        )


def _check_ranges_width(
    body: CohereEmbedRequest, ranges: QuantizationRanges | None, width: int | None
) -> None:
    """int8/uint8 scaled by the server's ranges file need ranges of the width asked for: refused
    before the model runs, not after the texts were embedded."""
    if ranges is None or body.calibration is not None or width is None:
        return
    if {"int8", "uint8"} & set(body.types) and width not in ranges.by_width:
        # said to the API's client: the server's file path and the operator's command are not theirs
        have = ", ".join(str(w) for w in sorted(ranges.by_width))
        raise APIError(
            400,
            f"output_dimension {width}: the server's int8/uint8 ranges are for {have} dimensions, not "
            f"{width}; ask for one of those or send calibration vectors (its operator can add the width "
            f"with poolrag calibrate --dimensions {width})",
            param="output_dimension",
        )


def _refuse_over_max_tokens(outputs: Sequence[Any], max_tokens: int, field: str) -> None:
    """Cohere's ``max_tokens`` under ``truncate: NONE``: a text longer than it is an error (its SDK:
    a longer text is "truncated according to the truncate parameter"), a shorter one is embedded."""
    for i, out in enumerate(outputs):
        if out.num_tokens > max_tokens:
            raise APIError(
                400,
                f"{field}[{i}] has {out.num_tokens} tokens, more than max_tokens ({max_tokens}); shorten "
                "it, raise max_tokens or send truncate END to keep its first tokens",
                param="max_tokens",
                code="context_length_exceeded",
            )


@router.post(PATH, response_model=CohereEmbedResponse, responses=ENGINE_ERRORS)
async def create_embed(body: CohereEmbedRequest, request: Request, response: Response) -> CohereEmbedResponse:
    return await _embed(body, request, response, PATH)


@router.post(V1_PATH, response_model=CohereEmbedResponse | CohereFloatsResponse, responses=ENGINE_ERRORS)
async def create_embed_v1(
    body: CohereEmbedRequest, request: Request, response: Response
) -> CohereEmbedResponse | CohereFloatsResponse:
    answer = await _embed(body, request, response, V1_PATH)
    meta = answer.meta.model_copy(update={"api_version": {"version": "1"}})  # as Cohere v1 answers
    if body.embedding_types is not None:
        return answer.model_copy(update={"meta": meta})
    return CohereFloatsResponse(
        id=answer.id, embeddings=answer.embeddings["float"], texts=answer.texts, meta=meta
    )


async def _embed(
    body: CohereEmbedRequest, request: Request, response: Response, path: str
) -> CohereEmbedResponse:
    state = model_state(request, body.model)
    params, calibration = _checked(body, state, served_models(request))
    outputs = await _run(body, state, params, path)
    return _answer(body, state, outputs, calibration, response)


def _checked(
    body: CohereEmbedRequest, state: ServerState, served: ServedModels
) -> tuple[PoolingParams, np.ndarray | None]:
    """The request's pooling parameters and calibration matrix, everything the model cannot give
    refused before the request takes a slot, in Cohere's field names (a model that gives no
    embeddings naming, as every route's refusal does, the served models that embed)."""
    facts = state.engine.facts
    if "embed" not in facts.supported_tasks:
        runners = task_runners("embed", state.served_facts, [model.served_facts for model in served.models])
        # only a field the request sent: one naming neither reached the only kind of model served,
        # and no field of it would change that
        param = "embedding_types" if body.embedding_types is not None else "model" if body.model else None
        raise APIError(
            400,
            ("embedding_types: " if param == "embedding_types" else "")  # "model 'x'" names the model
            + f"model {state.name!r} gives no embeddings (its tasks: {', '.join(facts.supported_tasks)})"
            + served_here(runners),
            param=param,
            code="unsupported_task",
        )
    if body.has_images and not facts.reads_images:
        raise APIError(400, f"{body.field}: this model reads text only", param=body.field)
    check_input_count(state.settings, len(body.items), body.field)
    _check_scalable(body, state.ranges)
    params = _params(body, facts)
    calibration = _calibration(body)
    try:
        params.verify("embed", facts)
    except DimensionsError as exc:
        raise APIError(  # the code /v1/embeddings answers for its dimensions
            400,
            str(exc).replace("dimensions", "output_dimension", 1),
            param="output_dimension",
            code="invalid_dimensions",
        ) from exc
    _check_ranges_width(body, state.ranges, params.dimensions or facts.embedding_dim)
    return params, calibration


async def _run(
    body: CohereEmbedRequest, state: ServerState, params: PoolingParams, path: str
) -> list[PoolingRequestOutput[EmbeddingOutput]]:
    """The engine's embeddings of the request's items; its long-input errors said in Cohere's terms
    (``truncate``, ``max_tokens``), not in vLLM's ``truncate_prompt_tokens``."""
    inputs = body.items
    try:
        with fields_named(input=body.field):
            outputs = await state.run_engine(path, len(inputs), state.engine.aembed, inputs, params)
    except InputTooLongError as exc:
        raise APIError(
            400,
            f"{exc.where} has {exc.num_tokens} tokens, more than the model's maximum of {exc.max_len}; "
            "shorten it or send truncate END to keep its first tokens",
            param="truncate",
            code="context_length_exceeded",
        ) from exc
    except InvalidInputError as exc:  # max_tokens too small to hold any text
        if exc.param != "truncate_prompt_tokens":
            raise
        raise APIError(
            400, str(exc).replace("truncate_prompt_tokens", "max_tokens"), param="max_tokens"
        ) from exc
    if body.truncate == "NONE" and body.max_tokens is not None:
        _refuse_over_max_tokens(outputs, body.max_tokens, body.field)
    return outputs


def _answer(
    body: CohereEmbedRequest,
    state: ServerState,
    outputs: Sequence[PoolingRequestOutput[EmbeddingOutput]],
    calibration: np.ndarray | None,
    response: Response,
) -> CohereEmbedResponse:
    """Cohere's response: each type asked for, the tokens billed, and the warnings."""
    vectors = np.stack([np.asarray(out.outputs.embedding, dtype=np.float32) for out in outputs])
    tokens = sum(out.num_tokens for out in outputs)
    warnings = _warnings(body, state, report_truncated(response, outputs), len(outputs), calibration)
    return CohereEmbedResponse(
        id=new_id("embd", None),
        embeddings=_by_type(vectors, body.types, calibration, state.ranges),
        texts=list(body.texts or ()),
        meta=CohereMeta(billed_units=CohereBilledUnits(input_tokens=tokens), warnings=warnings or None),
    )


def _warnings(
    body: CohereEmbedRequest, state: ServerState, truncated: int, count: int, calibration: np.ndarray | None
) -> list[str]:
    """What a Cohere client would not expect: texts truncated, int8/uint8 scaled by this request alone."""
    cut_by_request = body.max_tokens is not None and body.max_tokens < state.engine.facts.max_model_len
    limit = f"max_tokens ({body.max_tokens})" if cut_by_request else "the model's maximum length"
    warnings = [f"{truncated} of {count} texts were truncated to {limit}"] if truncated else []
    if state.ranges is None and calibration is None and {"int8", "uint8"} & set(body.types):
        warnings.append(_SCALED_BY_REQUEST.format(n=count))
    return warnings


#: Cohere's int8/uint8 are fixed per model, so a client may merge batches (its SDK sends 96 texts a
#: request); scaled by one request's own texts they are not comparable with another request's.
_SCALED_BY_REQUEST = (
    "int8/uint8 were scaled by this request's own {n} texts (no fixed ranges): values from another "
    "request are on another scale; start the server with --calibration FILE ('poolrag calibrate') "
    "or send calibration vectors"
)
