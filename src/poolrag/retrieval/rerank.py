"""Cross-encoder reranking: the last, most expensive and most precise stage of retrieval.

Precise on its own training domain only: outside it a cross-encoder can rank worse than the
retrieval it reranks, so by default its scores are fused with the first stage's
(:mod:`poolrag.retrieval.fusion`) and ``second_stage="replace"`` is the opt-in for its order alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from poolrag.backend import PoolingBackend
from poolrag.errors import InvalidInputError
from poolrag.input_shapes import item_list
from poolrag.model_facts import ScoreKind
from poolrag.params import PoolingParams
from poolrag.retrieval.fusion import (
    DEFAULT_RERANK_WEIGHT,
    ScoreNormalisation,
    SecondStage,
    descending_order,
    fuse_second_stage,
)
from poolrag.retrieval.results import SearchResult
from poolrag.text_validity import text_problem

#: ``SearchResult.stage_scores`` keys the second stage writes: the reranker's own score, and the
#: fused score (absent with ``replace``, where the reranker's score is the final one).
RERANK_STAGE = "rerank"
FUSED_STAGE = "fused"


class Reranking(NamedTuple):
    """One query's second stage; ``scores`` and ``rerank_scores`` are in the candidates' input order."""

    order: np.ndarray  # candidate indices, best first
    scores: np.ndarray  # final score of each candidate (the ranking key)
    rerank_scores: np.ndarray  # the reranker's own score of each candidate


def second_stage_mode(value: SecondStage | str) -> SecondStage:
    """``value`` as a :class:`SecondStage`, or an error naming the choices."""
    try:
        return SecondStage(value)
    except ValueError:
        choices = ", ".join(repr(m.value) for m in SecondStage)
        raise InvalidInputError(f"unknown second stage {value!r}; choose one of {choices}") from None


def check_rerank_weight(weight: float) -> float:
    """The reranker's share of the fused score; 0 keeps the first stage's order, 1 the reranker's."""
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0.0 <= weight <= 1.0:
        raise InvalidInputError(f"the reranker weight must be a number in [0, 1], got {weight!r}")
    return float(weight)


class CrossEncoderReranker:
    """Scores (query, passage) pairs jointly with a cross-encoder backend; higher is more relevant.

    Args:
        backend: a cross-encoder (``facts.score_kind`` is ``ScoreKind.CROSS_ENCODER``, ``"cross-encoder"``).
        second_stage: how its scores make the final order (see :class:`SecondStage`); ``fuse``
            by default, ``replace`` for the reranker's order alone.
        weight: the reranker's share when fusing, in [0, 1]; ``None``: the share a
            :class:`~poolrag.retrieval.Retriever` picks for its collection (a saved ``eval --tune``
            choice, else the default for the reranker's languages), 0.5 outside one.
        normalisation: how each query's scores are rescaled before a ``fuse`` mix.
    """

    def __init__(
        self,
        backend: PoolingBackend,
        *,
        second_stage: SecondStage | str = SecondStage.FUSE,
        weight: float | None = DEFAULT_RERANK_WEIGHT,
        normalisation: ScoreNormalisation | str = ScoreNormalisation.ZSCORE,
    ) -> None:
        facts = backend.facts
        if facts.score_kind is not ScoreKind.CROSS_ENCODER:
            how = (  # a model that scores no pairs at all (a token classifier) has no score kind to name
                f"it scores by {facts.score_kind.value}"
                if "score" in facts.supported_tasks
                else f"it runs {', '.join(facts.supported_tasks)}, not score"
            )
            raise InvalidInputError(f"{facts.model_name} is not a cross-encoder ({how}); reranking needs one")
        self.backend = backend
        self.second_stage = second_stage_mode(second_stage)
        self.weight = None if weight is None else check_rerank_weight(weight)
        self.normalisation = ScoreNormalisation(normalisation)

    def with_weight(self, weight: float) -> CrossEncoderReranker:
        """The same reranker fusing with another share."""
        return CrossEncoderReranker(
            self.backend, second_stage=self.second_stage, weight=weight, normalisation=self.normalisation
        )

    def scores(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """The reranker's own score of each passage, in input order."""
        passages = item_list(passages, "passages")
        if not passages:
            return np.zeros(0, dtype=np.float64)
        # Long passages are cut to the model's limit rather than failing the whole search. Kept in
        # float64, as the server and the adapters fuse them: a float32 cast would move fused ranks.
        scores = self.backend.score_array(query, passages, PoolingParams(truncate_prompt_tokens=-1))
        return np.asarray(scores, dtype=np.float64)

    def rerank(
        self,
        query: str,
        passages: Sequence[str],
        first_stage_scores: npt.ArrayLike | None = None,
        *,
        second_stage: SecondStage | str | None = None,
        weight: float | None = None,
    ) -> Reranking:
        """Score ``passages`` (given in first-stage order, best first) and decide the final order.

        ``first_stage_scores`` are the first stage's score of each passage; without them the input
        order is the first stage's ranking and ``fuse`` falls back to reciprocal-rank fusion.
        ``second_stage`` and ``weight`` override this reranker's settings for one call.
        """
        mode = self.second_stage if second_stage is None else second_stage_mode(second_stage)
        own = DEFAULT_RERANK_WEIGHT if self.weight is None else self.weight
        share = own if weight is None else check_rerank_weight(weight)
        if first_stage_scores is not None and len(np.asarray(first_stage_scores)) != len(passages):
            raise InvalidInputError(
                f"{len(np.asarray(first_stage_scores))} first-stage scores for {len(passages)} passages"
            )
        rerank_scores = self.scores(query, passages)
        final = fuse_second_stage(rerank_scores, first_stage_scores, mode, share, self.normalisation)
        return Reranking(descending_order(final), final, rerank_scores)

    def rerank_results(self, query: str, results: Sequence[SearchResult]) -> list[SearchResult]:
        """The retrievers' second stage: ``results`` (first stage's order and scores) best first again.

        Each result keeps its earlier stage scores, gains the reranker's under ``"rerank"`` and,
        unless the mode is ``replace``, the fused one under ``"fused"``; ``score`` is the final one.
        """
        if not results:
            return []
        for r in results:  # an image, or a point another writer added (a framework's store)
            # text_validity's rule, not strip(): a scraped page's zero-width-only text was refused
            # by the model as text_2[i], an index into this batch the caller never saw
            if (problem := text_problem(r.text)) is not None:
                if r.payload.get("modality"):
                    what = "an image or page without text"
                else:
                    what = "a point without text" if not r.text.strip() else f"a point whose text {problem}"
                raise InvalidInputError(
                    f"result {r.id!r} (source {r.source or None!r}) is {what}: a text reranker "
                    "cannot score it (search without the reranker to see it)"
                )
        reranking = self.rerank(query, [r.text for r in results], [r.score for r in results])
        fused = self.second_stage is not SecondStage.REPLACE
        for r, final, own in zip(results, reranking.scores, reranking.rerank_scores, strict=True):
            r.stage_scores[RERANK_STAGE] = float(own)
            if fused:
                r.stage_scores[FUSED_STAGE] = float(final)
            r.score = float(final)
        return [results[i] for i in reranking.order]
