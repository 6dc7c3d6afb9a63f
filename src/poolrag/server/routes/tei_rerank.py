"""``/rerank`` in Text Embeddings Inference's dialect (a body with ``texts``; the path's Jina/Cohere
dialect with ``documents`` is :mod:`poolrag.server.routes.rerank`): every text's ``{index, score}``,
best first, the text too with ``return_text``.

A cross-encoder's score is TEI's: the sigmoid of its logit whatever activation the folder names
(a sentence-transformers Identity included), the logit with ``raw_scores``; no fusion. TEI serves
rerankers only; here an embedding or ColBERT model ranks by cosine or MaxSim, as on the path's
other dialect (``raw_scores`` then has nothing to switch off and is refused).
"""

from __future__ import annotations

import numpy as np
from fastapi import Request, Response

from poolrag.model_facts import ScoreKind
from poolrag.params import PoolingParams
from poolrag.server.errors import APIError
from poolrag.server.inputs import check_input_count, fields_named
from poolrag.server.scope_path import route_path
from poolrag.server.state import model_state
from poolrag.server.tei_activation import sigmoid
from poolrag.server.tei_inputs import tei_truncate
from poolrag.server.tei_schemas import TeiRank, TeiRerankRequest, TeiRerankResponse
from poolrag.server.truncation_report import report_truncated


async def tei_rerank(body: TeiRerankRequest, request: Request, response: Response) -> TeiRerankResponse:
    state = model_state(request, body.model)
    check_input_count(state.settings, len(body.texts), "texts")
    kind = state.engine.facts.score_kind
    if body.raw_scores and kind in (ScoreKind.COSINE, ScoreKind.MAXSIM):  # in TEI's field's name
        ranks_by = "MaxSim" if kind is ScoreKind.MAXSIM else "cosine"
        raise APIError(
            400,
            f"raw_scores applies to a cross-encoder's logit; this model ranks by {ranks_by}, which has "
            "none: send raw_scores false",
            param="raw_scores",
        )
    logits = kind is ScoreKind.CROSS_ENCODER
    params = PoolingParams(use_activation=False if logits else None, truncate=tei_truncate(body))
    params.verify("score", state.engine.facts)  # refused before the request takes a slot
    with fields_named(text_1="query", text_2="texts"):
        outputs = await state.run_engine(
            route_path(request.scope),
            len(body.texts),
            state.engine.ascore,
            body.query,
            list(body.texts),
            params,
        )
    report_truncated(response, outputs)
    scores = np.asarray([out.outputs.score for out in outputs], dtype=np.float64)
    if logits and not body.raw_scores:
        scores = sigmoid(scores)
    order = reversed(np.argsort(scores, kind="stable").tolist())  # TEI's stable sort, reversed
    return TeiRerankResponse(
        [
            TeiRank(index=i, score=float(scores[i]), text=body.texts[i] if body.return_text else None)
            for i in order
        ]
    )
