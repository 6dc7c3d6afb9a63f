"""Ordering scored candidates: the one rule both frameworks' rerankers follow.

Both rerankers fuse the model's scores with the retriever's by default
(:mod:`poolrag.retrieval.fusion`): a cross-encoder outside its training domain can rank worse than
the retrieval it reranks. LlamaIndex hands over each node's retrieval score, so the two are mixed
after per-query z-scoring; LangChain hands over documents without scores, so the documents' order
is fused with the reranker's by reciprocal rank. :class:`RerankerFields` holds the scoring call and
this rule, so each framework's reranker only converts its documents or nodes to texts and back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from pydantic import Field

from poolrag.errors import InvalidInputError
from poolrag.frameworks.adapter_calls import check_text
from poolrag.frameworks.fields import BackendFields
from poolrag.retrieval.fusion import DEFAULT_RERANK_WEIGHT, SecondStage, fuse_second_stage


class Ranked(NamedTuple):
    """One reranked candidate."""

    index: int  # its position in the input
    score: float  # the final score (the reranker's own with ``replace``)
    rerank_score: float  # the reranker's own score


class RerankerFields(BackendFields):
    """A reranker's arguments (where the model runs, how many to keep, how to fuse) and its one
    scoring call, declared once for both frameworks."""

    top_n: int | None = Field(
        default=None, ge=1, description="Candidates to keep; None keeps all, reordered."
    )
    second_stage: SecondStage = Field(
        default=SecondStage.FUSE,
        description="fuse: mix with the retriever's scores (or its order when there are none); "
        "rrf: fuse the two orders; replace: the reranker's order alone.",
    )
    rerank_weight: float = Field(
        default=DEFAULT_RERANK_WEIGHT, ge=0.0, le=1.0, description="The reranker's share when fusing."
    )

    def _order(self, scores: npt.ArrayLike, first_stage_scores: Sequence[float] | None) -> list[Ranked]:
        weight = self.rerank_weight
        return rank_second_stage(scores, self.top_n, first_stage_scores, self.second_stage, weight)

    def _rank(
        self, query: object, texts: list[str], first_stage_scores: Sequence[float] | None
    ) -> list[Ranked]:
        """The ``top_n`` texts most relevant to ``query``, best first, scored in one backend call and
        ordered by :func:`rank_second_stage`."""
        checked = check_text(query, "the query")
        if not texts:
            return []
        scores = self.backend.score_array(checked, texts, self._params())
        return self._order(scores, first_stage_scores)

    async def _arank(
        self, query: object, texts: list[str], first_stage_scores: Sequence[float] | None
    ) -> list[Ranked]:
        checked = check_text(query, "the query")
        if not texts:
            return []
        scores = await self.backend.ascore_array(checked, texts, self._params())
        return self._order(scores, first_stage_scores)


def check_top_n(top_n: int | None, name: str = "top_n") -> None:
    """Refuse a count that is not a positive integer (``None`` means all) before any model call."""
    if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1):
        raise InvalidInputError(f"{name} must be a positive integer, got {top_n!r}")


def best_first(scores: np.ndarray | Sequence[float], top_n: int | None) -> list[int]:
    """Indices of the ``top_n`` highest scores (all when ``None``), best first; ties keep input order,
    so equal scores never reshuffle what the retriever ranked."""
    check_top_n(top_n)
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    return [int(i) for i in order[:top_n]]


def rank_second_stage(
    rerank_scores: npt.ArrayLike,
    top_n: int | None,
    first_stage_scores: Sequence[float] | None = None,
    second_stage: SecondStage | str = SecondStage.REPLACE,
    weight: float = DEFAULT_RERANK_WEIGHT,
) -> list[Ranked]:
    """The ``top_n`` best candidates (all when ``None``) under ``second_stage``, best first.

    Candidates are given in the retriever's order; ``first_stage_scores`` (one per candidate) are
    its scores when it has them.
    """
    check_top_n(top_n)
    own = np.asarray(rerank_scores, dtype=np.float64)
    if first_stage_scores is not None and len(first_stage_scores) != own.size:
        raise InvalidInputError(f"{len(first_stage_scores)} first-stage scores for {own.size} candidates")
    final = fuse_second_stage(own, first_stage_scores, second_stage, weight)
    return [Ranked(i, float(final[i]), float(own[i])) for i in best_first(final, top_n)]
