"""``POST /invocations``: SageMaker's one path, where every request of an endpoint arrives.

TEI's container and vLLM's both serve it, each with its own bodies, and this server takes both,
told apart by their fields. A Text Embeddings Inference body (``inputs``, or a reranker's
``texts``) gets the route of the kind of the model it names (else the first's), as TEI's container
answers it for its model (``POST /``: :mod:`poolrag.server.routes.tei_root`), errors in TEI's
shape. Any other body gets the vLLM route its fields name: ``query`` and ``documents`` rerank; the
two sides of a score (``text_1``, ``queries``, ``data_1``...) score; ``task`` pools; ``input``
embeds where the model it names embeds, else classifies or pools.

vLLM tries its request models in that order and takes the first that validates, answering "cannot
find suitable handler" when none does; telling them apart by their fields instead keeps a wrong
field's error the route's own. One difference: vLLM embeds a body with a ``task`` beside
``input`` on an embedding model, ignoring the task; here it pools with that task.

This module is written without postponed annotations: the endpoint's body class is built per app
(TEI's bodies by the kinds of the models served), and the route classes read it from the
endpoint's annotations.
"""

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Request, Response
from pydantic import Discriminator, Tag

from poolrag.server.errors import APIError
from poolrag.server.routes.classify import classify
from poolrag.server.routes.embeddings import create_embeddings
from poolrag.server.routes.pooling import pooling
from poolrag.server.routes.rerank import rerank_documents
from poolrag.server.routes.score import score_pairs
from poolrag.server.routes.tei_root import answer_tei_body, tei_root_body
from poolrag.server.schemas import (
    SCORE_SIDE_NAMES,
    ClassificationRequest,
    EmbeddingRequest,
    PoolingRequest,
    RerankRequest,
    ScoreRequest,
)
from poolrag.server.state import ServedModels
from poolrag.server.tei_routing import TeiRoute
from poolrag.server.tei_schemas import EitherBody

PATH = "/invocations"

#: The fields naming one side of a score, in any of vLLM's spellings.
_SCORE_FIELDS = frozenset({"text_1", "text_2"} | {name for pair in SCORE_SIDE_NAMES for name in pair})
_NO_ROUTE = (
    "no route takes this body: send TEI's (inputs, or query and texts) or one of vLLM's: input "
    "(embeddings, or classify), query and documents (rerank), text_1 and text_2 or queries and "
    "documents (score), input and task (pooling)"
)


def speaks_tei(data: Any) -> bool:
    """Whether a body is Text Embeddings Inference's: ``inputs``, or a rerank's ``texts``."""
    return isinstance(data, dict) and ("inputs" in data or ("texts" in data and "documents" not in data))


class InvocationBody(EitherBody):
    """The base of each app's ``/invocations`` body: ``root`` is the request of the route it takes."""

    dialect_speaks_tei = staticmethod(speaks_tei)


def _route_tag(tasks_of: Callable[[object], frozenset[str]], data: Any) -> str | None:
    """The route a body's fields name (a tag of the body's union), or ``None`` for none."""
    if not isinstance(data, dict):
        return None
    if speaks_tei(data):
        return "TEI"
    if "query" in data and "documents" in data:  # before score, as vLLM tries rerank first
        return "Rerank"
    if not _SCORE_FIELDS.isdisjoint(data):
        return "Score"
    if "task" in data:
        return "Pooling"
    if "input" in data or "messages" in data:
        tasks = tasks_of(data.get("model"))
        return "Embeddings" if "embed" in tasks else "Classify" if "classify" in tasks else "Pooling"
    return None


def _tasks_of(served: ServedModels) -> Callable[[object], frozenset[str]]:
    """The tasks of the model a body names; naming none (or one not served, refused later as a
    404), those of every model served, as the route then finds the first that runs its task."""
    every = frozenset(task for model in served.models for task in model.engine.facts.supported_tasks)

    def tasks_of(name: object) -> frozenset[str]:
        if not name or not isinstance(name, str):  # a non-string is the route's 400 to give
            return every
        try:
            return frozenset(served.lookup(name).engine.facts.supported_tasks)
        except APIError:
            return every

    return tasks_of


def invocations_router(served: ServedModels) -> APIRouter:
    """``POST /invocations`` for the models ``served`` holds; TEI bodies go to the route of the
    named model's kind (else the first's), as ``POST /`` does."""
    tei_body = tei_root_body(served)
    tasks_of = _tasks_of(served)
    union = (
        Annotated[tei_body, Tag("TEI")]
        | Annotated[EmbeddingRequest, Tag("Embeddings")]
        | Annotated[ClassificationRequest, Tag("Classify")]
        | Annotated[RerankRequest, Tag("Rerank")]
        | Annotated[ScoreRequest, Tag("Score")]
        | Annotated[PoolingRequest, Tag("Pooling")]
    )
    discriminator = Discriminator(
        lambda data: _route_tag(tasks_of, data),
        custom_error_type="no_route",
        custom_error_message=_NO_ROUTE,
    )
    body_class: Any = type(
        "InvocationBody",
        (InvocationBody,),
        {"__annotations__": {"root": Annotated[union, discriminator]}, "__module__": __name__},
    )
    routes: dict[type, Callable[[Any, Request, Response], Awaitable[Any]]] = {
        EmbeddingRequest: create_embeddings,
        ClassificationRequest: classify,
        RerankRequest: rerank_documents,
        ScoreRequest: score_pairs,
        PoolingRequest: pooling,
    }

    async def invocations(body: body_class, request: Request, response: Response) -> Any:
        route = routes.get(type(body.root))
        if route is not None:
            return await route(body.root, request, response)
        return await answer_tei_body(body.root.root, request, response)

    router = APIRouter(tags=["sagemaker"], route_class=TeiRoute)
    # vLLM's answers hold no nulls; TEI's and the rerank's leave theirs out
    router.add_api_route(
        PATH, invocations, methods=["POST"], response_model_exclude_none=True, include_in_schema=False
    )
    return router
