"""``POST /rerank``, ``/v1/rerank``, ``/v2/rerank``: Jina / Cohere rerank API.

Runs ``engine.score``, so it works for cross-encoders, embedding models (cosine) and ColBERT
models (MaxSim) alike.

A client that sends its retriever's ``first_stage_scores`` gets the reranker's scores fused with
them (``second_stage="fuse"`` by default), as the library's retrievers do: a reranker outside its
training domain can rank worse than the retrieval it reranks. A client that sends no first-stage
information gets plain reranker scores (``replace``), so Jina and Cohere clients see what those
APIs return. With ``return_documents``, each result carries its document as it was given: a
string as ``{"text": ...}``, an object with all its keys (Cohere v1 echoes an id or a title). Unsaid,
``/rerank`` and ``/v1/rerank`` echo the documents, as Jina and vLLM answer; ``/v2/rerank`` does not,
as Cohere's v2 API answers each result's ``index`` and ``relevance_score`` only.

A body with ``texts`` instead of ``documents`` is Text Embeddings Inference's, answered in TEI's
shape (:mod:`poolrag.server.routes.tei_rerank`).
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from poolrag.retrieval.fusion import DEFAULT_RERANK_WEIGHT, SecondStage, rank_second_stage
from poolrag.server.errors import APIError
from poolrag.server.inputs import check_input_count, fields_named, score_params
from poolrag.server.openapi import ENGINE_ERRORS
from poolrag.server.routes.tei_rerank import tei_rerank
from poolrag.server.schemas import (
    ContentDocument,
    RerankBilledUnits,
    RerankDocument,
    RerankDocumentIn,
    RerankMeta,
    RerankRequest,
    RerankResponse,
    RerankResult,
    Usage,
)
from poolrag.server.scope_path import route_path
from poolrag.server.state import model_state, new_id
from poolrag.server.tei_routing import TeiRoute, with_tei_errors
from poolrag.server.tei_schemas import RerankBody, TeiRerankRequest, TeiRerankResponse
from poolrag.server.truncation_report import pairs_cut, report_truncated

router = APIRouter(tags=["scoring"], route_class=TeiRoute)


async def rerank_documents(body: RerankRequest, request: Request, response: Response) -> RerankResponse:
    state = model_state(request, body.model)
    texts = [_ranked_item(doc) for doc in body.documents]
    check_input_count(state.settings, len(texts), "documents")
    mode = _second_stage(body, len(texts))
    params = score_params(body, state.engine.facts)
    path = route_path(request.scope)
    echo = _echoes_documents(body, path)
    (query,), query_cut = await state.first_tokens(path, [body.query], body.max_tokens_per_query)
    texts, texts_cut = await state.first_tokens(path, texts, body.max_tokens_per_doc)
    variables = body.template_variables()
    with fields_named(text_1="query", text_2="documents"):
        outputs = await state.run_engine(
            path, len(texts), state.engine.ascore, query, texts, params, template_variables=variables
        )
    weight = DEFAULT_RERANK_WEIGHT if body.rerank_weight is None else body.rerank_weight
    ranked = rank_second_stage(
        [out.outputs.score for out in outputs],
        body.first_stage_scores,
        mode,
        weight,
        top_n=body.top_n or None,
    )
    results = [
        RerankResult(
            index=r.index,
            relevance_score=r.score,
            rerank_score=None if mode is SecondStage.REPLACE else r.rerank_score,
            document=_echoed(body.documents[r.index]) if echo else None,
        )
        for r in ranked
    ]
    tokens = sum(out.num_tokens for out in outputs)
    truncated = report_truncated(response, outputs, pairs_cut(query_cut, texts_cut))
    return RerankResponse(
        id=new_id("rerank", body.request_id),
        model=state.settings.model_name,
        usage=Usage(prompt_tokens=tokens, total_tokens=tokens),
        results=results,
        meta=_cohere_meta(path, len(texts), truncated),
    )


#: Cohere bills a search unit per query with up to this many documents.
_DOCUMENTS_PER_SEARCH_UNIT = 100


def _cohere_meta(path: str, n_documents: int, truncated: int) -> RerankMeta:
    """Cohere's ``meta``, which its answers always carry (code counting usage reads
    ``meta.billed_units.search_units``); a truncation is told in ``warnings``, as on ``/v2/embed``."""
    units = -(-n_documents // _DOCUMENTS_PER_SEARCH_UNIT)
    cut = f"{truncated} of {n_documents} query-document pairs were truncated to fit the model"
    warnings = [cut] if truncated else None
    return RerankMeta(
        api_version={"version": "2" if path == _BARE_RESULTS_PATH else "1"},
        billed_units=RerankBilledUnits(search_units=units),
        warnings=warnings,
    )


#: Cohere's v2 rerank answers no documents (its SDK lost return_documents in July 2025).
_BARE_RESULTS_PATH = "/v2/rerank"


def _echoes_documents(body: RerankRequest, path: str) -> bool:
    """``return_documents`` as sent, else the default of the API the path is: Cohere v2 echoes
    nothing, Jina's and vLLM's routes echo every document."""
    if body.return_documents is not None:
        return body.return_documents
    return path != _BARE_RESULTS_PATH


def _ranked_item(document: str | RerankDocumentIn | ContentDocument) -> str:
    """What the model reads of a document: a string, an object's text, a content's part."""
    if isinstance(document, str):
        return document
    return document.item if isinstance(document, ContentDocument) else document.text


def _echoed(document: str | RerankDocumentIn | ContentDocument) -> RerankDocument:
    if isinstance(document, str):
        return RerankDocument({"text": document})
    if isinstance(document, ContentDocument):
        return RerankDocument({"text": None, "multi_modal": document.content})
    return RerankDocument({"text": document.text, **(document.model_extra or {})})


def _second_stage(body: RerankRequest, n_documents: int) -> SecondStage:
    """The request's second stage, checked before any model call."""
    first = body.first_stage_scores
    if first is not None and len(first) != n_documents:
        raise APIError(
            400,
            f"first_stage_scores has {len(first)} scores for {n_documents} documents; send one per document",
            param="first_stage_scores",
        )
    if body.second_stage is not None:
        mode = body.second_stage
    else:
        mode = SecondStage.REPLACE if first is None else SecondStage.FUSE
    if mode is SecondStage.REPLACE and body.rerank_weight is not None:
        raise APIError(
            400,
            "rerank_weight has no effect when the reranker's scores replace the first stage's; "
            "send first_stage_scores or second_stage 'fuse' or 'rrf'",
            param="rerank_weight",
        )
    return mode


async def _rerank_in_dialect(
    body: RerankBody, request: Request, response: Response
) -> RerankResponse | TeiRerankResponse:
    """Jina's and Cohere's body (``documents``) or TEI's (``texts``), each answered in its own shape."""
    if isinstance(body.root, TeiRerankRequest):
        return await tei_rerank(body.root, request, response)
    return await rerank_documents(body.root, request, response)


for _path in ("/rerank", "/v1/rerank", "/v2/rerank"):
    router.add_api_route(
        _path,
        _rerank_in_dialect,
        methods=["POST"],
        response_model=RerankResponse | TeiRerankResponse,
        response_model_exclude_none=True,
        responses=with_tei_errors(ENGINE_ERRORS),
        name=f"rerank{_path.replace('/', '_')}",
        summary="Rerank documents for a query",
    )
