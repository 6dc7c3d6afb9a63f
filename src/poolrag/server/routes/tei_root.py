"""``POST /``: Text Embeddings Inference's route of the model's own kind, which TEI clients call when
given the server's bare URL (``InferenceClient("http://host:port").feature_extraction(...)``,
LangChain's ``HuggingFaceEndpointEmbeddings(model="http://host:port")``); SageMaker's
``POST /invocations`` answers TEI's bodies with the same route (:mod:`poolrag.server.routes.invocations`).

As TEI chooses it when it starts, from the model answering requests that name none: an embedding
model embeds (``/embed``; ``/similarity``'s body, an object of sentences, gets similarities, which
TEI gives only when started so; ``text_classification``'s, with its ``parameters``, is a
``/predict``, answered by a classifier served beside it or refused as ``/predict`` is), a
cross-encoder reranks (``/rerank``; ``/predict``'s body classifies, as
``InferenceClient.text_classification`` sends it; ``feature_extraction``'s is refused, as TEI's
reranker refuses it), a classifier predicts, a sparse model answers
``/embed_sparse``. A model of no TEI kind (ColBERT, a token classifier) answers TEI's 424,
naming its tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from poolrag.model_facts import ModelFacts, ScoreKind
from poolrag.server.errors import APIError
from poolrag.server.routes.embed_sparse import embed_sparse
from poolrag.server.routes.tei_embed import embed
from poolrag.server.routes.tei_predict import predict
from poolrag.server.routes.tei_rerank import tei_rerank
from poolrag.server.routes.tei_similarity import similarity
from poolrag.server.tei_errors import tei_error_response
from poolrag.server.tei_routing import TEI_ERRORS, TeiRoute
from poolrag.server.tei_schemas import (
    EmbedOrSimilarityBody,
    RerankOrPredictBody,
    TeiEmbedResponse,
    TeiEmbedSparseResponse,
    TeiPredictRequest,
    TeiPredictResponse,
    TeiRerankRequest,
    TeiRerankResponse,
    TeiSimilarityRequest,
    TeiSimilarityResponse,
)

PATH = "/"


async def embed_or_similarity(
    body: EmbedOrSimilarityBody, request: Request, response: Response
) -> TeiEmbedResponse | TeiSimilarityResponse | TeiPredictResponse:
    if isinstance(body.root, TeiSimilarityRequest):
        return await similarity(body.root, request, response)
    if isinstance(body.root, TeiPredictRequest):
        return await predict(body.root, request, response)
    return await embed(body.root, request, response)


async def rerank_or_predict(
    body: RerankOrPredictBody, request: Request, response: Response
) -> TeiRerankResponse | TeiPredictResponse:
    if isinstance(body.root, TeiRerankRequest):
        return await tei_rerank(body.root, request, response)
    return await predict(body.root, request, response)


def route_of_kind(facts: ModelFacts) -> tuple[Callable[..., Any], Any] | None:
    """The endpoint and answer model of ``/`` for a model, or ``None`` where TEI has no such kind."""
    tasks = facts.supported_tasks
    if "embed" in tasks:
        return embed_or_similarity, TeiEmbedResponse | TeiSimilarityResponse | TeiPredictResponse
    if facts.score_kind is ScoreKind.CROSS_ENCODER and "score" in tasks:
        return rerank_or_predict, TeiRerankResponse | TeiPredictResponse
    if "classify" in tasks:
        return predict, TeiPredictResponse
    if "sparse_embed" in tasks:
        return embed_sparse, TeiEmbedSparseResponse
    return None


def no_tei_kind(facts: ModelFacts) -> APIError:
    """The refusal of a TEI body by a model of no TEI kind, naming the tasks it runs instead."""
    return APIError(
        400,
        "TEI serves embedding models, rerankers and classifiers at /; this model runs "
        f"{', '.join(facts.supported_tasks)}: POST /pooling with one of them as task",
        code="unsupported_task",
    )


def root_router(facts: ModelFacts) -> APIRouter:
    """``POST /`` for the model ``facts`` describe; for a model TEI would not serve (a token
    classifier, ColBERT), TEI's 424 naming the tasks it runs on ``/pooling``, not a 405."""
    router = APIRouter(tags=["text-embeddings-inference"], route_class=TeiRoute)
    route = route_of_kind(facts)
    if route is None:
        refusal = no_tei_kind(facts)

        async def no_route() -> JSONResponse:
            return tei_error_response(refusal)

        router.add_api_route(
            PATH, no_route, methods=["POST"], include_in_schema=False, route_class_override=APIRoute
        )
    else:
        endpoint, answer = route
        router.add_api_route(
            PATH,
            endpoint,
            methods=["POST"],
            response_model=answer,
            response_model_exclude_none=True,
            responses=TEI_ERRORS,
            name="tei_root",
            summary="The route of the model's kind, as TEI serves it at /",
        )
    return router
