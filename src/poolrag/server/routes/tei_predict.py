"""``POST /predict``: Text Embeddings Inference's classification, best label first.

A text runs the model's classifier (``classify``); a pair of texts is read jointly, by a one-label
cross-encoder's ``score`` (its score template, if any) or by a classifier of several labels
(``classify_pairs``: an NLI model's entailment, neutral, contradiction). One logit goes through a
sigmoid, as TEI applies it whatever the folder names (a sentence-transformers Identity included);
several labels take the model's own activation (softmax, or a multi-label model's sigmoid, as
sentence-transformers, vLLM and the transformers pipeline apply it), and TEI's softmax where the folder
names none (Identity, as sentence-transformers 6 saves a CrossEncoder of several labels);
``raw_scores`` gives the logits.
``huggingface_hub``'s ``text_classification`` options (``parameters``: ``function_to_apply``,
``top_k``) are honoured. One input answers a list, a batch a list per input.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from fastapi import APIRouter, Request, Response

from poolrag.errors import InvalidTextError
from poolrag.model_facts import ScoreKind
from poolrag.outputs import PoolingRequestOutput
from poolrag.params import PoolingParams
from poolrag.server.errors import APIError
from poolrag.server.inputs import check_input_count
from poolrag.server.scope_path import route_path
from poolrag.server.state import ServerState, model_state
from poolrag.server.tei_activation import activated
from poolrag.server.tei_inputs import tei_truncate
from poolrag.server.tei_routing import TEI_ERRORS, TeiRoute
from poolrag.server.tei_schemas import (
    TeiClassificationParameters,
    TeiPrediction,
    TeiPredictRequest,
    TeiPredictResponse,
)
from poolrag.server.truncation_report import report_truncated

router = APIRouter(tags=["text-embeddings-inference"], route_class=TeiRoute)

TextSequence = tuple[str] | tuple[str, str]  # a text, or a pair read jointly


def _predictions(scores: np.ndarray, id2label: dict[int, str], top_k: int | None) -> list[TeiPrediction]:
    """Labels by score, best first; equal scores in TEI's order (its stable sort, reversed)."""
    order = list(reversed(np.argsort(scores, kind="stable").tolist()))
    return [TeiPrediction(score=float(scores[i]), label=id2label.get(i, f"LABEL_{i}")) for i in order[:top_k]]


def _activation(body: TeiPredictRequest, options: TeiClassificationParameters) -> str | None:
    """The caller's ``function_to_apply``, ``"none"`` for raw scores, or ``None``: TEI's own."""
    if body.raw_scores and options.function_to_apply not in (None, "none"):
        raise APIError(
            400,
            "raw_scores asks for the logits and parameters.function_to_apply for an activation; give one",
            param="raw_scores",
        )
    return "none" if body.raw_scores else options.function_to_apply


async def _scores(
    state: ServerState, path: str, sequences: Sequence[TextSequence], params: PoolingParams
) -> tuple[list[np.ndarray], list[PoolingRequestOutput[Any]]]:
    """Each sequence's scores per label (texts through ``classify``; pairs through ``score`` on a
    one-label cross-encoder, else ``classify_pairs``), and the engine's outputs."""
    singles = [i for i, seq in enumerate(sequences) if len(seq) == 1]
    pairs = [i for i, seq in enumerate(sequences) if len(seq) == 2]
    facts = state.engine.facts
    scores: list[np.ndarray] = [np.empty(0)] * len(sequences)
    answered: list[PoolingRequestOutput[Any]] = []
    if singles:
        params.verify("classify", facts)
        texts = [sequences[i][0] for i in singles]
        outputs = await state.run_engine(path, len(texts), state.engine.aclassify, texts, params)
        for i, out in zip(singles, outputs, strict=True):
            scores[i] = np.asarray(out.outputs.probs, dtype=np.float64)
        answered += outputs
    if pairs:
        firsts, seconds = [sequences[i][0] for i in pairs], [sequences[i][1] for i in pairs]
        if "score" in facts.supported_tasks and facts.score_kind is ScoreKind.CROSS_ENCODER:
            params.verify("score", facts)
            scored = await state.run_engine(path, len(pairs), state.engine.ascore, firsts, seconds, params)
            pair_scores = [np.asarray([out.outputs.score], dtype=np.float64) for out in scored]
            answered += scored
        else:
            params.verify("classify", facts)
            classified = await state.run_engine(
                path, len(pairs), state.engine.aclassify_pairs, firsts, seconds, params
            )
            pair_scores = [np.asarray(out.outputs.probs, dtype=np.float64) for out in classified]
            answered += classified
        for i, pair_score in zip(pairs, pair_scores, strict=True):
            scores[i] = pair_score
    return scores, answered


def _named(error: InvalidTextError, sequences: Sequence[TextSequence], batch: bool) -> InvalidTextError:
    """The engine's ``input[j]`` or ``text_1[j]``/``text_2[j]`` (its j-th single text or pair) as the
    text's place in ``inputs``: ``inputs[i][k]`` in a batch, else ``inputs[k]``."""
    pair = error.field != "input"
    places = [i for i, seq in enumerate(sequences) if (len(seq) == 2) == pair]
    i = places[error.index or 0]
    if not batch and len(sequences[i]) == 1:  # one text: it is ``inputs`` itself
        return error.renamed("inputs", None)
    return error.renamed(f"inputs[{i}]" if batch else "inputs", int(error.field == "text_2"))


def _sequences(inputs: str | TextSequence | list[TextSequence]) -> list[TextSequence]:
    if isinstance(inputs, str):
        return [(inputs,)]
    return list(inputs) if isinstance(inputs, list) else [inputs]


@router.post("/predict", response_model=TeiPredictResponse, responses=TEI_ERRORS)
async def predict(body: TeiPredictRequest, request: Request, response: Response) -> TeiPredictResponse:
    state = model_state(request, body.model)
    batch = isinstance(body.inputs, list)
    sequences = _sequences(body.inputs)
    check_input_count(state.settings, len(sequences), "inputs")
    options = body.parameters or TeiClassificationParameters()
    function = _activation(body, options)
    if function is None and len(state.engine.id2label) == 1:
        function = "sigmoid"  # TEI's, whatever activation the folder names
    elif function is None and state.engine.classify_activation == "identity":
        function = "softmax"  # TEI's for several labels (sentence-transformers 6 saves them as Identity)
    elif function is None:  # the model's, a pair's too (classify_pairs' own is CrossEncoder.predict's)
        function = state.engine.classify_activation
    params = PoolingParams(use_activation=False, truncate=tei_truncate(body))  # the logits, activated below
    try:
        scores, outputs = await _scores(state, route_path(request.scope), sequences, params)
    except InvalidTextError as error:  # the engine's input or pair, named as this request gave it
        raise _named(error, sequences, batch) from None
    report_truncated(response, outputs)
    predictions = [_predictions(activated(s, function), state.engine.id2label, options.top_k) for s in scores]
    return TeiPredictResponse(predictions if batch else predictions[0])
