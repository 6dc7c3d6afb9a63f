"""``POST /rerank``, ``/v1/rerank``, ``/v2/rerank``: Jina / Cohere rerank API.

Runs ``engine.score``, so it works for cross-encoders, embedding models (cosine) and ColBERT
models (MaxSim) alike.
"""

from __future__ import annotations

from fastapi import APIRouter, Request

from poolrag.params import PoolingParams
from poolrag.server.errors import APIError
from poolrag.server.inputs import check_count, is_blank
from poolrag.server.openapi import ENGINE_ERRORS
from poolrag.server.routing import OffLoopRoute
from poolrag.server.schemas import (
    RerankDocument,
    RerankRequest,
    RerankResponse,
    RerankResult,
    RerankUsage,
)
from poolrag.server.state import new_id, server_state

router = APIRouter(tags=["scoring"], route_class=OffLoopRoute)


async def _rerank(body: RerankRequest, request: Request) -> RerankResponse:
    state = server_state(request)
    state.check_model(body.model)
    texts = [doc if isinstance(doc, str) else doc.text for doc in body.documents]
    check_count(state.settings, len(texts), "documents")
    if is_blank(body.query):
        raise APIError(400, "query is empty", param="query", code="empty_input")
    blank = next((i for i, text in enumerate(texts) if is_blank(text)), None)
    if blank is not None:
        raise APIError(400, f"documents[{blank}] is empty", param="documents", code="empty_input")
    params = PoolingParams(truncate_prompt_tokens=body.truncate_prompt_tokens)
    outputs = await state.run_engine(request.url.path, "score", len(texts), body.query, texts, params)
    order = sorted(range(len(texts)), key=lambda i: -outputs[i].outputs.score)  # stable on ties
    if body.top_n:
        order = order[: body.top_n]
    results = [
        RerankResult(
            index=i,
            relevance_score=outputs[i].outputs.score,
            document=RerankDocument(text=texts[i]) if body.return_documents else None,
        )
        for i in order
    ]
    return RerankResponse(
        id=new_id("rerank"),
        model=state.settings.model_name,
        usage=RerankUsage(total_tokens=sum(out.num_tokens for out in outputs)),
        results=results,
    )


for _path in ("/rerank", "/v1/rerank", "/v2/rerank"):
    router.add_api_route(
        _path,
        _rerank,
        methods=["POST"],
        response_model=RerankResponse,
        response_model_exclude_none=True,
        responses=ENGINE_ERRORS,
        name=f"rerank{_path.replace('/', '_')}",
        summary="Rerank documents for a query",
    )
