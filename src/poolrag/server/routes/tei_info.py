"""``GET /info``: Text Embeddings Inference's model info (what TEI clients read before they call:
the kind of model, its input length, the batch limits), for the model answering requests that name
none, or, with several served, the one ``?model=NAME`` names (poolrag's parameter: TEI serves one
model and its clients send none). The model is named by its served name: a folder's path is the
host's business."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

import poolrag
from poolrag.model_facts import ScoreKind
from poolrag.server.openapi import ENGINE_ERRORS, READ_ERRORS
from poolrag.server.state import ServerState, model_state
from poolrag.server.tei_schemas import (
    TeiClassifierModel,
    TeiClassifierType,
    TeiEmbeddingModel,
    TeiEmbeddingType,
    TeiInfo,
    TeiRerankerType,
)

router = APIRouter(tags=["text-embeddings-inference"])

#: poolrag's pooling types as TEI names them.
_POOLING = {"CLS": "cls", "MEAN": "mean", "LAST": "last_token", "SPLADE": "splade"}


def _model_type(state: ServerState) -> TeiEmbeddingType | TeiClassifierType | TeiRerankerType:
    """TEI's kinds: a one-label cross-encoder is a reranker, a model that classifies and does not
    embed a classifier, any other an embedding model with its pooling."""
    engine = state.engine
    facts = engine.facts
    labels = {str(i): label for i, label in sorted(engine.id2label.items())}
    classifier = TeiClassifierModel(id2label=labels, label2id={label: int(i) for i, label in labels.items()})
    if facts.score_kind is ScoreKind.CROSS_ENCODER and "score" in facts.supported_tasks:
        return TeiRerankerType(reranker=classifier)
    classifies = "classify" in facts.supported_tasks or "token_classify" in facts.supported_tasks
    if classifies and "embed" not in facts.supported_tasks:  # a token classifier too, with its labels
        return TeiClassifierType(classifier=classifier)
    pooling = engine.pooler_config.pooling_type or "MEAN"  # type: ignore[attr-defined]
    if "embed" not in facts.supported_tasks and "sparse_embed" in facts.supported_tasks:
        pooling = "SPLADE"
    return TeiEmbeddingType(embedding=TeiEmbeddingModel(pooling=_POOLING.get(pooling, pooling.lower())))


@router.get("/info", response_model=TeiInfo, responses={**READ_ERRORS, 404: ENGINE_ERRORS[404]})
async def info(
    request: Request,
    model: Annotated[
        str | None,
        Query(description="poolrag extension: a served model name (omitted: the first model's info)."),
    ] = None,
) -> TeiInfo:
    state = model_state(request, model)  # naming none, the first model
    engine = state.engine
    settings = state.settings
    return TeiInfo(
        model_id=state.name,
        model_dtype=str(engine.dtype).removeprefix("torch."),  # type: ignore[attr-defined]
        served_model_name=state.name,
        model_type=_model_type(state),
        max_concurrent_requests=settings.max_queue,
        max_input_length=engine.facts.max_model_len,
        max_batch_tokens=engine.max_batch_tokens,
        max_batch_requests=engine.engine_args.max_batch_size,  # type: ignore[attr-defined]  # as TEI: given, else null
        max_client_batch_size=settings.max_inputs,
        auto_truncate=engine.engine_args.truncate,  # type: ignore[attr-defined]
        tokenization_workers=settings.engine_threads,
        version=poolrag.__version__,
    )
