"""Fusing a second stage with the first: rank fusion and per-query normalised score mixing.

The second stage merges a cross-encoder's scores with the first stage's (hybrid search fuses its
dense and sparse legs by the rules of :mod:`poolrag.stores.hybrid`). A cross-encoder used
alone can rank *worse* than the retrieval it reranks when the corpus is outside its training
domain (on a held-out FAQ set an ms-marco reranker lowered MRR@10 from 0.666 to 0.657), while
fusing the two stages raised it (RRF 0.675, z-scored half-and-half mix 0.685). So fusion is the
default second stage and ``replace`` (the reranker's order alone) is the opt-in.

Scores from different models live on different scales (cosine in [-1, 1], cross-encoder logits
anywhere), so they are never added raw: either each list is normalised per query (z-score, or
min-max) before a weighted sum, or only ranks are used (RRF), which needs no scores at all — the
case of a LangChain compressor, which receives documents without their retrieval scores.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from poolrag.counts import check_optional_count
from poolrag.errors import InvalidInputError

DEFAULT_RRF_K = 60
"""The constant of Cormack et al. (2009); it damps the head of each list so that one list's
first place cannot outvote agreement further down. Milvus' ``RRFRanker`` defaults to it too;
Qdrant's ``Fusion.RRF`` uses k = 2 and scores ``1 / (rank - 1 + k)``, so the stores ask it for 61."""

DEFAULT_RERANK_WEIGHT = 0.5


class SecondStage(StrEnum):
    """How the reranker's scores turn into the final order.

    ``fuse``: mix with the first stage's scores after per-query normalisation when the first stage
    has scores, reciprocal-rank fusion of the two orders when it has only an order.
    ``rrf``: reciprocal-rank fusion of the two orders even when scores exist.
    ``replace``: the reranker's order alone (what rerankers did before fusion).
    """

    FUSE = "fuse"
    RRF = "rrf"
    REPLACE = "replace"


class ScoreNormalisation(StrEnum):
    """Per-query rescaling that puts two scorers on a common scale before mixing.

    ``zscore`` (default) is robust to one outlier stretching the range; ``minmax`` maps to [0, 1].
    """

    ZSCORE = "zscore"
    MINMAX = "minmax"


def _finite_scores(scores: npt.ArrayLike, what: str) -> np.ndarray:
    array = np.asarray(scores, dtype=np.float64)
    if array.ndim != 1:
        raise InvalidInputError(f"{what} must be a 1-D sequence of scores, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise InvalidInputError(f"{what} contain NaN or infinite values; they cannot be ranked")
    return array


def normalise_scores(
    scores: npt.ArrayLike, method: ScoreNormalisation | str = ScoreNormalisation.ZSCORE
) -> np.ndarray:
    """Rescale one query's scores so that scores of different models can be added.

    A list whose scores are all equal (or that has a single item) cannot tell its items apart, so
    it becomes all zeros and adds nothing to the order instead of dividing by zero into NaN.
    """
    array = _finite_scores(scores, "scores")
    method = ScoreNormalisation(method)
    if array.size == 0:
        return array
    # Both rescalings ignore the unit, so dividing by the largest magnitude first changes nothing
    # but keeps scores near the float limit (a client's, say) from overflowing into inf and NaN.
    largest = float(np.max(np.abs(array)))
    if largest > 1.0:
        array = array / largest
    if method is ScoreNormalisation.ZSCORE:
        centred = array - array.mean()
        spread = float(np.sqrt(np.mean(centred * centred)))
    else:
        centred = array - array.min()
        spread = float(array.max() - array.min())
    # A spread that is zero, or tiny against scores now at most 1 in size, is rounding noise, not signal.
    if spread <= 1e-12:
        return np.zeros_like(array)
    return centred / spread


def descending_order(scores: npt.ArrayLike) -> np.ndarray:
    """Indices that sort ``scores`` from best to worst; equal scores keep their input order."""
    array = _finite_scores(scores, "scores")
    return np.argsort(-array, kind="stable")


def ranks_from_scores(scores: npt.ArrayLike) -> np.ndarray:
    """1-based rank of each item under :func:`descending_order` (ties broken by input order)."""
    order = descending_order(scores)
    ranks = np.empty(order.size, dtype=np.int64)
    ranks[order] = np.arange(1, order.size + 1)
    return ranks


def _check_weight(weight: float) -> None:
    if not 0.0 <= weight <= 1.0:
        raise InvalidInputError(f"the reranker weight must be in [0, 1], got {weight}")


def mix_normalised_scores(
    first_stage: npt.ArrayLike,
    reranker: npt.ArrayLike,
    weight: float = DEFAULT_RERANK_WEIGHT,
    normalisation: ScoreNormalisation | str = ScoreNormalisation.ZSCORE,
) -> np.ndarray:
    """``(1 - weight) · norm(first_stage) + weight · norm(reranker)``, item by item.

    Both arrays score the same candidates in the same order; each is normalised over this query's
    candidates only, because score scales drift from query to query.
    """
    _check_weight(weight)
    first = normalise_scores(first_stage, normalisation)
    second = normalise_scores(reranker, normalisation)
    if first.shape != second.shape:
        raise InvalidInputError(f"{first.size} first-stage scores for {second.size} reranker scores")
    return (1.0 - weight) * first + weight * second


def fuse_second_stage(
    reranker_scores: npt.ArrayLike,
    first_stage_scores: npt.ArrayLike | None = None,
    mode: SecondStage | str = SecondStage.FUSE,
    weight: float = DEFAULT_RERANK_WEIGHT,
    normalisation: ScoreNormalisation | str = ScoreNormalisation.ZSCORE,
    rrf_k: float = DEFAULT_RRF_K,
) -> np.ndarray:
    """The final score of each candidate; sort with :func:`descending_order`.

    Candidates arrive in first-stage order (best first) with the reranker's score of each. When
    first-stage scores are given, their own order is the first-stage ranking (equal to the input
    order whenever they are sorted); without them the input order is.

    In RRF the two ranks get weights ``2 · (1 - weight)`` and ``2 · weight``, so the default 0.5
    is the textbook unweighted sum and ``weight`` means the same thing in every mode.
    """
    mode = SecondStage(mode)
    _check_weight(weight)
    if not np.isfinite(rrf_k) or rrf_k < 0:
        raise InvalidInputError(f"the RRF constant k must be a finite number >= 0, got {rrf_k}")
    reranked = _finite_scores(reranker_scores, "reranker scores")
    if mode is SecondStage.REPLACE:
        return reranked.copy()
    if first_stage_scores is not None:
        first = _finite_scores(first_stage_scores, "first-stage scores")
        if first.shape != reranked.shape:
            raise InvalidInputError(f"{first.size} first-stage scores for {reranked.size} reranker scores")
        if mode is SecondStage.FUSE:
            return mix_normalised_scores(first, reranked, weight, normalisation)
        first_ranks = ranks_from_scores(first)
    else:
        first_ranks = np.arange(1, reranked.size + 1)
    rerank_ranks = ranks_from_scores(reranked)
    return 2.0 * (1.0 - weight) / (rrf_k + first_ranks) + 2.0 * weight / (rrf_k + rerank_ranks)


class Ranked(NamedTuple):
    """One reranked candidate."""

    index: int  # its position in the input
    score: float  # the final score (the reranker's own with ``replace``)
    rerank_score: float  # the reranker's own score


def rank_second_stage(
    rerank_scores: npt.ArrayLike,
    first_stage_scores: npt.ArrayLike | None = None,
    second_stage: SecondStage | str = SecondStage.REPLACE,
    weight: float = DEFAULT_RERANK_WEIGHT,
    *,
    top_n: int | None = None,
) -> list[Ranked]:
    """The ``top_n`` best candidates (all when ``None``) under ``second_stage``, best first: what
    every reranking door (the server's ``/rerank``, both frameworks' rerankers) returns.

    Candidates are given in the retriever's order; ``first_stage_scores`` (one per candidate) are
    its scores when it has them. Equal final scores keep the retriever's order.
    """
    check_optional_count(top_n, "top_n")
    own = _finite_scores(rerank_scores, "reranker scores")
    if first_stage_scores is not None and len(first_stage_scores) != own.size:  # in every mode
        raise InvalidInputError(f"{len(first_stage_scores)} first-stage scores for {own.size} candidates")
    final = fuse_second_stage(own, first_stage_scores, second_stage, weight)
    return [Ranked(int(i), float(final[i]), float(own[i])) for i in descending_order(final)[:top_n]]
