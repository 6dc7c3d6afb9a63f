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
from typing import ClassVar

import numpy.typing as npt
from pydantic import Field

from poolrag.counts import check_optional_count
from poolrag.frameworks.fields import BackendFields
from poolrag.retrieval.fusion import DEFAULT_RERANK_WEIGHT, Ranked, SecondStage, rank_second_stage
from poolrag.text_validity import check_text, check_texts


class RerankerFields(BackendFields):
    """A reranker's arguments (where the model runs, how many to keep, how to fuse) and its one
    scoring call, declared once for both frameworks."""

    _task: ClassVar[str | None] = "score"

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
        return rank_second_stage(scores, first_stage_scores, self.second_stage, weight, top_n=self.top_n)

    def _rank(
        self, query: object, texts: list[str], first_stage_scores: Sequence[float] | None
    ) -> list[Ranked]:
        """The ``top_n`` texts most relevant to ``query``, best first, scored in one backend call and
        ordered by :func:`rank_second_stage`."""
        checked = _checked(query, texts)
        if not texts:
            return []
        scores = self.backend.score_array(checked, texts, self._params())
        return self._order(scores, first_stage_scores)

    async def _arank(
        self, query: object, texts: list[str], first_stage_scores: Sequence[float] | None
    ) -> list[Ranked]:
        checked = _checked(query, texts)
        if not texts:
            return []
        scores = await self.backend.ascore_array(checked, texts, self._params())
        return self._order(scores, first_stage_scores)


def _checked(query: object, texts: list[str]) -> str:
    """The query, once it and every document were checked (``documents[3] is empty``), before any
    model call."""
    check_texts(texts, "documents")
    return check_text(query, "the query")


def check_top_n(top_n: int | None, name: str = "top_n") -> None:
    """Refuse a count that is not a positive integer (``None`` means all) before any model call."""
    check_optional_count(top_n, name)
