"""``POST /similarity``: Text Embeddings Inference's sentence similarity (what ``huggingface_hub``'s
``InferenceClient.sentence_similarity`` asks for): the cosine of each sentence's vector with the
source sentence's, all embedded with the same parameters."""

from __future__ import annotations

import numpy as np
from fastapi import APIRouter, Request, Response

from poolrag.errors import InvalidInputError, at_position
from poolrag.params import PoolingParams
from poolrag.server.inputs import check_input_count
from poolrag.server.scope_path import route_path
from poolrag.server.state import model_state
from poolrag.server.tei_inputs import tei_truncate
from poolrag.server.tei_routing import TEI_ERRORS, TeiRoute
from poolrag.server.tei_schemas import TeiSimilarityParameters, TeiSimilarityRequest, TeiSimilarityResponse
from poolrag.server.truncation_report import report_truncated

router = APIRouter(tags=["text-embeddings-inference"], route_class=TeiRoute)


@router.post("/similarity", response_model=TeiSimilarityResponse, responses=TEI_ERRORS)
async def similarity(
    body: TeiSimilarityRequest, request: Request, response: Response
) -> TeiSimilarityResponse:
    state = model_state(request, body.model)
    sentences = body.inputs.sentences
    texts = [body.inputs.source_sentence, *sentences]
    check_input_count(state.settings, len(sentences), "inputs.sentences")
    check_input_count(state.settings, len(texts), "inputs.sentences")  # the source counts too, as in TEI
    options = body.parameters or TeiSimilarityParameters()
    params = PoolingParams(normalize=True, truncate=tei_truncate(options), prompt_name=options.prompt_name)
    params.verify("embed", state.engine.facts)
    try:
        outputs = await state.run_engine(
            route_path(request.scope), len(texts), state.engine.aembed, texts, params
        )
    except InvalidInputError as error:  # the engine's input[0] is the source, input[i] sentence i - 1
        names = ["inputs.source_sentence", *(f"inputs.sentences[{i}]" for i in range(len(sentences)))]
        raise at_position(error, names) from None
    report_truncated(response, outputs)
    vectors = np.stack([np.asarray(out.outputs.embedding, dtype=np.float64) for out in outputs])
    return TeiSimilarityResponse((vectors[1:] @ vectors[0]).tolist())
