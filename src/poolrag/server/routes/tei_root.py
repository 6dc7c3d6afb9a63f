"""``POST /``: Text Embeddings Inference's route of the model's own kind, which TEI clients call when
given the server's bare URL (``InferenceClient("http://host:port").feature_extraction(...)``,
LangChain's ``HuggingFaceEndpointEmbeddings(model="http://host:port")``); SageMaker's
``POST /invocations`` answers TEI's bodies with the same route (:mod:`poolrag.server.routes.invocations`).

TEI serves one model and picks the route from its kind when it starts. Here the kind is that of the
model the body names (``model``, poolrag's field), else of the first model served: an embedding
model embeds (``/embed``; ``/similarity``'s body, an object of sentences, gets similarities, which
TEI gives only when started so; ``text_classification``'s, with its ``parameters``, is a
``/predict``, answered by a classifier served beside it or refused as ``/predict`` is), a
cross-encoder reranks (``/rerank``; ``/predict``'s body classifies, as
``InferenceClient.text_classification`` sends it; ``feature_extraction``'s is refused, as TEI's
reranker refuses it), a classifier predicts, a sparse model answers
``/embed_sparse``. A model of no TEI kind (ColBERT, a token classifier) answers TEI's 424,
naming its tasks.

This module is written without postponed annotations: the endpoint's body class is built per app
(from the kinds of the models served), and the route classes read it from the endpoint's annotations.
"""

import functools
import operator
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from fastapi import APIRouter, Request, Response

from poolrag.model_facts import ModelFacts, ScoreKind
from poolrag.server.errors import APIError
from poolrag.server.routes.embed_sparse import embed_sparse
from poolrag.server.routes.tei_embed import embed
from poolrag.server.routes.tei_predict import predict
from poolrag.server.routes.tei_rerank import tei_rerank
from poolrag.server.routes.tei_similarity import similarity
from poolrag.server.state import ServedModels, model_state
from poolrag.server.tei_routing import TEI_ERRORS, TeiRoute
from poolrag.server.tei_schemas import (
    TeiEmbedRequest,
    TeiEmbedResponse,
    TeiEmbedSparseRequest,
    TeiEmbedSparseResponse,
    TeiPredictRequest,
    TeiPredictResponse,
    TeiRerankRequest,
    TeiRerankResponse,
    TeiRootBody,
    TeiSimilarityRequest,
    TeiSimilarityResponse,
    UnservedTeiBody,
    embed_dialect,
    reranker_dialect,
    root_body,
)

PATH = "/"

#: What TEI serves a model as, which picks the route ``/`` runs for it.
TeiKind = Literal["embedding", "reranker", "classifier", "sparse"]

#: The bodies (tags of :data:`~poolrag.server.tei_schemas.ROOT_BODIES`) ``/`` takes for each kind.
_BODIES: dict[TeiKind | None, tuple[str, ...]] = {
    "embedding": ("Embed", "Similarity", "Predict"),
    "reranker": ("Rerank", "Predict", "EmbedOnCrossEncoder"),
    "classifier": ("Predict",),
    "sparse": ("Sparse",),
    None: ("Unserved",),
}
_ANSWERS: dict[TeiKind, Any] = {
    "embedding": TeiEmbedResponse | TeiSimilarityResponse | TeiPredictResponse,
    "reranker": TeiRerankResponse | TeiPredictResponse,
    "classifier": TeiPredictResponse,
    "sparse": TeiEmbedSparseResponse,
}
_ROUTES: dict[type, Callable[[Any, Request, Response], Awaitable[Any]]] = {
    TeiEmbedRequest: embed,
    TeiSimilarityRequest: similarity,
    TeiPredictRequest: predict,
    TeiRerankRequest: tei_rerank,
    TeiEmbedSparseRequest: embed_sparse,
}


def tei_kind(facts: ModelFacts) -> TeiKind | None:
    """The kind TEI would serve a model as, or ``None`` where TEI has no such kind."""
    tasks = facts.supported_tasks
    if "embed" in tasks:
        return "embedding"
    if facts.score_kind is ScoreKind.CROSS_ENCODER and "score" in tasks:
        return "reranker"
    if "classify" in tasks:
        return "classifier"
    if "sparse_embed" in tasks:
        return "sparse"
    return None


def no_tei_kind(facts: ModelFacts) -> APIError:
    """The refusal of a TEI body by a model of no TEI kind, naming the tasks it runs instead."""
    return APIError(
        400,
        "TEI serves embedding models, rerankers and classifiers at /; this model runs "
        f"{', '.join(facts.supported_tasks)}: POST /pooling with one of them as task",
        code="unsupported_task",
    )


def _tag(kind: TeiKind | None, data: Any) -> str:
    """The body a model of ``kind`` takes ``data`` as."""
    if kind == "embedding":
        return embed_dialect(data)
    if kind == "reranker":
        return reranker_dialect(data)
    return _BODIES[kind][0]


def tei_root_body(served: ServedModels) -> type[TeiRootBody]:
    """The body class of ``/`` (and of TEI's bodies at ``/invocations``) for the models ``served``
    holds: read as the model it names takes it (naming none, as the first model takes it). A name
    not served is the 404 naming those that are, before the body is read as any kind's: its shape
    depends on the model meant, so no field of it can be wrong yet."""
    first = tei_kind(served.default.engine.facts)

    def kind_named(data: Any) -> TeiKind | None:
        name = data.get("model") if isinstance(data, dict) else None
        if not isinstance(name, str) or not name:  # a non-string is the body's 422 to give
            return first
        # the lookup's 404 is no ValueError, so pydantic lets it out of validation as it is
        return tei_kind(served.lookup(name).engine.facts)

    tags = [tag for model in served.models for tag in _BODIES[tei_kind(model.engine.facts)]]
    return root_body(tags, lambda data: _tag(kind_named(data), data))


async def answer_tei_body(body: Any, request: Request, response: Response) -> Any:
    """The answer of the TEI route ``body`` (a root of :func:`tei_root_body`'s class) was taken for;
    a model of no TEI kind refuses it."""
    if isinstance(body, UnservedTeiBody):
        raise no_tei_kind(model_state(request, body.model).engine.facts)
    return await _ROUTES[type(body)](body, request, response)


def root_router(served: ServedModels) -> APIRouter:
    """``POST /`` for the models ``served`` holds; on a server of no model TEI would serve (a token
    classifier, ColBERT), TEI's 424 naming the tasks it runs on ``/pooling``, not a 405."""
    body_class: Any = tei_root_body(served)
    kinds = [kind for kind in dict.fromkeys(tei_kind(model.engine.facts) for model in served.models) if kind]

    async def tei_root(body: body_class, request: Request, response: Response) -> Any:
        return await answer_tei_body(body.root, request, response)

    router = APIRouter(tags=["text-embeddings-inference"], route_class=TeiRoute)
    router.add_api_route(
        PATH,
        tei_root,
        methods=["POST"],
        response_model=functools.reduce(operator.or_, [_ANSWERS[kind] for kind in kinds]) if kinds else None,
        response_model_exclude_none=True,
        responses=TEI_ERRORS,
        name="tei_root",
        summary="The route of the named model's kind (else the first's), as TEI serves it at /",
        include_in_schema=bool(kinds),
    )
    return router
