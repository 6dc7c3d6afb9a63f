"""Ordering scored candidates: the one rule both frameworks' rerankers follow.

By default both return the model's order and the model's own score (the sigmoid of a one-label
cross-encoder, as sentence-transformers' ``CrossEncoder`` and vLLM's ``/rerank`` give it), as every
reranker they replace does (LangChain's ``CrossEncoderReranker`` and ``CohereRerank``, LlamaIndex's
``SentenceTransformerRerank``): a score a user can threshold, whatever order the documents came in.

Fusing with the first stage (:mod:`poolrag.retrieval.fusion`) is the opt-in ``second_stage="fuse"``:
it hedges against a cross-encoder outside its training domain. On the real FAQ sets of
benchmarks/RESULTS.md an ms-marco reranker over the hybrid's top 30 scored MRR@10 0.576 alone and
0.647 fused on the Debian FAQ (first stage 0.640), 0.463 alone and 0.501 fused on chatterbot (first
stage 0.496); on a generated set in its own domain it was ahead alone (0.747 vs 0.730). LlamaIndex
hands over each node's retrieval score, so the two are mixed after per-query z-scoring; LangChain
hands over documents without scores, so the documents' order is fused with the reranker's by
reciprocal rank. :class:`RerankerFields` holds the scoring call and this rule, so each framework's
reranker only converts its documents or nodes to texts and back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy.typing as npt
from pydantic import Field, model_validator

from poolrag.errors import InvalidInputError
from poolrag.frameworks.fields import BackendFields
from poolrag.retrieval.fusion import DEFAULT_RERANK_WEIGHT, Ranked, SecondStage, rank_second_stage
from poolrag.text_validity import check_text, check_texts


class RerankerFields(BackendFields):
    """A reranker's arguments (where the model runs, how many to keep, how to fuse) and its one
    scoring call, declared once for both frameworks."""

    _task: ClassVar[str | None] = "score"

    top_n: int | None = Field(
        default=None, ge=0, description="Candidates to keep; None keeps all, reordered."
    )
    second_stage: SecondStage = Field(
        default=SecondStage.REPLACE,
        description="replace: the model's order and score (as the rerankers it replaces); fuse: mix "
        "with the retriever's scores (or its order when there are none); rrf: fuse the two orders.",
    )
    rerank_weight: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description=f"The model's share when fusing (default {DEFAULT_RERANK_WEIGHT}); only with "
        "second_stage 'fuse' or 'rrf'.",
    )

    #: the fields only fusion reads (a framework's reranker adds its own)
    _fusion_fields: ClassVar[tuple[str, ...]] = ("rerank_weight",)

    @model_validator(mode="before")
    @classmethod
    def _fusion_settings_need_fusion(cls, data: Any) -> Any:
        """A fusion setting given without fusion would change nothing: refused, naming the switch,
        before any model is loaded."""
        if isinstance(data, dict) and data.get("second_stage", SecondStage.REPLACE) == SecondStage.REPLACE:
            given = [name for name in cls._fusion_fields if data.get(name) is not None]
            if given:
                raise InvalidInputError(
                    f"{' and '.join(given)} set how the model's scores are fused with the retriever's, "
                    "but second_stage is 'replace' (the default: the model's order and score); add "
                    "second_stage='fuse' (or 'rrf')"
                )
        return data

    def _order(self, scores: npt.ArrayLike, first_stage_scores: Sequence[float] | None) -> list[Ranked]:
        weight = DEFAULT_RERANK_WEIGHT if self.rerank_weight is None else self.rerank_weight
        return rank_second_stage(scores, first_stage_scores, self.second_stage, weight, top_n=self.top_n)

    def _rank(
        self, query: object, texts: list[str], first_stage_scores: Sequence[float] | None
    ) -> list[Ranked]:
        """The ``top_n`` texts most relevant to ``query``, best first, scored in one backend call and
        ordered by :func:`rank_second_stage`."""
        if (checked := self._query_to_score(query, texts)) is None:
            return []
        return self._order(self.backend.score_array(checked, texts, self._params()), first_stage_scores)

    async def _arank(
        self, query: object, texts: list[str], first_stage_scores: Sequence[float] | None
    ) -> list[Ranked]:
        if (checked := self._query_to_score(query, texts)) is None:
            return []
        scores = await self.backend.ascore_array(checked, texts, self._params())
        return self._order(scores, first_stage_scores)

    def _query_to_score(self, query: object, texts: list[str]) -> str | None:
        """The query, once it and every document were checked (``documents[3] is empty``), before any
        model call; ``None`` when there is nothing to score or to keep (``[]``, as the rerankers it
        replaces slice it)."""
        check_texts(texts, "documents")
        checked = check_text(query, "the query")
        return None if not texts or self.top_n == 0 else checked
