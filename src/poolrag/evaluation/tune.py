"""``poolrag eval --tune``: the hybrid setting that wins on the user's own judgements, and its proof.

A fusion rule chosen on someone else's data can lose to dense retrieval on yours (paraphrased
questions make BM25 weak, and an equal-weight fusion then drags dense down). So the setting is
chosen on the user's qrels, by k-fold cross-validation over queries: each fold's setting is picked
on the other folds and scored on that fold, so every query is scored once, held out, by a setting
that never saw it. The printed numbers are those held-out scores, beside dense on the same queries,
with per-query wins / ties / losses and a paired sign-flip permutation test.

It is cheap because nothing is searched twice: each query's dense and sparse legs are fetched once,
``prefetch`` deep (with a reranker, deep enough to fuse the candidates ``poolrag search --rerank``
reranks, :func:`~poolrag.evaluation.run.rerank_candidates`, and the cross-encoder scores every chunk
in either leg once);
every candidate is then fused here by the stores' own rules (:func:`poolrag.stores.hybrid.fuse_legs`
and :func:`poolrag.retrieval.fusion.fuse_second_stage`). A candidate's run widens as the table's
rows do (:func:`poolrag.evaluation.run.widened_documents`: long documents fill the first chunks, so
the fused list grows until k documents remain), the legs then fetched once more at each new depth,
so each candidate is scored as its own row of the table would be. Dense alone
(sparse share 0, reranker share 0) is a candidate, and ties go to the earlier candidate, so where
sparse evidence does not help on the training folds the choice is plain dense.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from poolrag.errors import InvalidInputError
from poolrag.evaluation.beir import BeirDataset
from poolrag.evaluation.metrics import DEFAULT_METRICS, Qrels, evaluate_per_query
from poolrag.evaluation.run import (
    CORPUS_ID_KEY,
    Evaluation,
    best_per_document,
    rerank_candidates,
    sparse_ranking,
    widened_documents,
    without_own_document,
)
from poolrag.retrieval.funnel import Retriever
from poolrag.retrieval.fusion import ScoreNormalisation, SecondStage, descending_order, fuse_second_stage
from poolrag.retrieval.rerank import CrossEncoderReranker
from poolrag.retrieval.results import SearchResult
from poolrag.stores.base import HybridFusion, StoreHit
from poolrag.stores.hybrid import DEFAULT_FUSION, fuse_legs, fusion_text, prefetch_depth
from poolrag.stores.retrieval_record import MAX_PREFETCH, RetrievalRecord

logger = logging.getLogger(__name__)

#: Sparse shares tried for the score fusion (0 is dense alone) and for weighted RRF.
MINMAX_SHARES = tuple(round(0.05 * i, 2) for i in range(21))
WEIGHTED_SHARES = (0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9)
#: Prior sparse shares tried for the adaptive fusion (the default's among them, so tuning starts
#: from at least what the user gets untuned).
ADAPTIVE_SHARES = (0.1, 0.2, 0.3, 0.4, 0.5)
#: The cross-encoder's shares tried in the fused second stage (0 keeps the first stage's order).
RERANK_SHARES = (0.0, 0.25, 0.5, 0.75, 1.0)
DEFAULT_FOLDS = 5
PERMUTATIONS = 10_000


@dataclass(frozen=True)
class Setting:
    """One candidate: a hybrid fusion and, when a reranker is tuned, its share of the second stage."""

    fusion: HybridFusion
    rerank_weight: float | None = None

    @property
    def dense_alone(self) -> bool:
        """Sparse share 0 and no reranker share (or share 0): the dense ranking, unchanged."""
        return self.fusion == ("minmax", 0.0) and not self.rerank_weight

    def describe(self) -> str:
        fusion = fusion_text(self.fusion)
        return fusion if self.rerank_weight is None else f"{fusion}, rerank {self.rerank_weight:g}"


def candidate_settings(rerank: bool = False) -> list[Setting]:
    """Every setting tried, dense alone first, then by growing sparse share (ties keep the earlier)."""
    fusions: list[HybridFusion] = [("minmax", share) for share in MINMAX_SHARES]
    fusions += [("adaptive", share) for share in ADAPTIVE_SHARES if ("adaptive", share) != DEFAULT_FUSION]
    fusions.insert(1, DEFAULT_FUSION)  # right after dense alone: a tie keeps the default
    fusions += ["dbsf", "rrf", *(("weighted", share) for share in WEIGHTED_SHARES)]
    if not rerank:
        return [Setting(fusion) for fusion in fusions]
    return [Setting(fusion, share) for share in RERANK_SHARES for fusion in fusions]


def kfold(ids: Sequence[str], folds: int, seed: int = 0) -> list[list[str]]:
    """``ids`` split into ``folds`` groups of near-equal size, the same for the same ids and seed
    (whatever order the ids come in)."""
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise InvalidInputError(f"folds must be an integer of at least 2, got {folds!r}")
    unique = sorted(set(ids))
    if len(unique) < folds:
        raise InvalidInputError(
            f"{folds}-fold cross-validation needs at least {folds} judged queries, got {len(unique)}"
        )
    order = np.random.default_rng(seed).permutation(len(unique))
    return [[unique[i] for i in sorted(order[f::folds])] for f in range(folds)]


@dataclass(frozen=True)
class PairedComparison:
    """Per-query comparison of a system with a baseline on one metric."""

    wins: int
    ties: int
    losses: int
    mean_difference: float
    p_value: float


def paired_test(system: Sequence[float], baseline: Sequence[float], *, seed: int = 0) -> PairedComparison:
    """Wins / ties / losses and a two-sided paired sign-flip permutation test of the mean difference.

    Under the null hypothesis each query's difference is as likely negative as positive, so its sign
    is flipped at random; the p-value is the share of flips (the observed one counted, so it is never
    0) whose mean is at least as far from 0 as the observed mean. Identical systems give p = 1.
    """
    a = np.asarray(system, dtype=np.float64)
    b = np.asarray(baseline, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise InvalidInputError(
            f"paired scores must be two equal, non-empty lists, got {a.shape} and {b.shape}"
        )
    difference = a - b
    tolerance = 1e-12
    wins = int(np.sum(difference > tolerance))
    losses = int(np.sum(difference < -tolerance))
    difference[np.abs(difference) <= tolerance] = 0.0
    observed = abs(float(difference.mean()))
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(PERMUTATIONS, difference.size))
    flipped = np.abs((signs * difference).mean(axis=1))
    extreme = int(np.sum(flipped >= observed - tolerance))
    p_value = (1 + extreme) / (1 + PERMUTATIONS)
    return PairedComparison(wins, a.size - wins - losses, losses, float(difference.mean()), p_value)


@dataclass
class QueryLegs:
    """One query's two legs, ``prefetch`` deep, and the cross-encoder's score of each of their chunks."""

    dense: list[StoreHit]
    sparse: list[StoreHit]
    rerank_scores: dict[str, float] | None = None


#: A query's legs fetched that many chunks deep.
LegSource = Callable[[int], QueryLegs]


class FetchedLegs:
    """One query's :data:`LegSource`: the legs a hybrid search of its text would fuse (the dense one
    through the funnel's re-score when the collection stores smaller vectors), searched once for each
    depth a candidate's run asks for, and each of their chunks scored by the cross-encoder once."""

    def __init__(self, retriever: Retriever, text: str, reranker: CrossEncoderReranker | None = None) -> None:
        self._retriever, self._text, self._reranker = retriever, text, reranker
        self._by_depth: dict[int, QueryLegs] = {}
        self._scores: dict[str, float] = {}

    def __call__(self, depth: int) -> QueryLegs:
        if depth not in self._by_depth:
            self._by_depth[depth] = self._fetch(depth)
        return self._by_depth[depth]

    def _fetch(self, depth: int) -> QueryLegs:
        dense = self._retriever.search(self._text, depth, mode="dense")
        sparse = sparse_ranking(self._retriever, self._text, depth)
        if self._reranker is None:
            return QueryLegs(_hits(dense), _hits(sparse))
        chunks: dict[str, str] = {}  # those not scored at an earlier depth
        for result in [*dense, *sparse]:
            if result.id not in self._scores:
                chunks.setdefault(result.id, result.text)
        if chunks:
            values = self._reranker.scores(self._text, list(chunks.values()))
            self._scores.update(zip(chunks, values.tolist(), strict=True))
        return QueryLegs(_hits(dense), _hits(sparse), self._scores)


def _hits(results: Sequence[SearchResult]) -> list[StoreHit]:
    return [StoreHit(r.id, r.score, r.payload) for r in results]


def fused_chunks(legs: QueryLegs, setting: Setting, depth: int, candidates: int) -> list[StoreHit]:
    """The ``depth`` chunks ``setting`` ranks first of the ``candidates`` fused from the legs (at least
    ``depth``; more only for a setting with a reranker share, which reranks them first, as search
    reranks its stage-1 candidates: what the table's hybrid and reranked rows rank)."""
    hits = fuse_legs(legs.dense, legs.sparse, candidates, setting.fusion)
    if setting.rerank_weight is not None and hits:
        assert legs.rerank_scores is not None
        final = fuse_second_stage(
            np.array([legs.rerank_scores[h.id] for h in hits]),
            np.array([h.score for h in hits]),
            SecondStage.FUSE,
            setting.rerank_weight,
            ScoreNormalisation.ZSCORE,
        )
        hits = [StoreHit(hits[i].id, float(final[i]), hits[i].payload) for i in descending_order(final)]
    return hits[:depth]


def candidate_run(
    legs: Mapping[str, LegSource],
    setting: Setting,
    *,
    k: int,
    depth: int,
    chunks: int,
    prefetch: int | None = None,
    qrels: Qrels | None = None,
) -> dict[str, list[tuple[str, float]]]:
    """The document run ``setting`` gives each query, as its row in ``poolrag eval``'s table would:
    ``depth`` chunks fused from legs as deep as the hybrid rows fetch them (``prefetch``, default at
    least 50; with a reranker share, :func:`~poolrag.evaluation.run.rerank_candidates` of them
    reranked, as the reranked rows do), widened by
    :func:`~poolrag.evaluation.run.widened_documents` over the collection's ``chunks`` until k
    documents remain, and, given the ``qrels``, a query's own unjudged document
    left out (:func:`~poolrag.evaluation.run.without_own_document`). So dense alone gives the dense
    row's ranking."""

    def run(query_id: str, source: LegSource) -> list[tuple[str, float]]:
        def documents(fused: int) -> tuple[int, list[tuple[str, float]]]:
            pool = fused if setting.rerank_weight is None else rerank_candidates(k, fused)
            hits = fused_chunks(source(prefetch_depth(pool, prefetch)), setting, fused, pool)
            ranked = best_per_document(
                (str(h.payload.get(CORPUS_ID_KEY, h.payload.get("source", h.id))), h.score) for h in hits
            )
            if qrels is not None:
                ranked = without_own_document(query_id, ranked, qrels.get(query_id, {}))
            return len(hits), ranked

        return widened_documents(documents, depth, k, chunks)

    return {query_id: run(query_id, source) for query_id, source in legs.items()}


@dataclass
class TuneReport:
    """What ``--tune`` found.

    Attributes:
        held_out: each metric averaged over the queries, each scored by the setting chosen without it.
        dense: the same metrics of dense retrieval on the same queries.
        comparison: per-query wins / ties / losses against dense on ``objective``, with the p-value.
        record: the setting chosen on all queries (what ``--save`` writes).
        fold_settings: the setting each fold's training queries chose.
    """

    held_out: dict[str, float]
    dense: dict[str, float]
    comparison: PairedComparison
    record: RetrievalRecord
    fold_settings: list[Setting]
    objective: str
    folds: int
    seed: int
    queries: int

    def to_json(self) -> dict[str, object]:
        """The ``"tuned"`` entry of ``poolrag eval --json``: the modes' metric keys, then the rest."""
        return {
            **self.held_out,
            "dense": self.dense,
            "setting": self.record.to_metadata(),
            "objective": self.objective,
            "folds": self.folds,
            "seed": self.seed,
            "queries": self.queries,
            "wins": self.comparison.wins,
            "ties": self.comparison.ties,
            "losses": self.comparison.losses,
            "p_value": self.comparison.p_value,
            "test": "paired sign-flip permutation",
        }


def choose(
    scores: Mapping[Setting, Mapping[str, Mapping[str, float]]], query_ids: Sequence[str], objective: str
) -> Setting:
    """The setting with the best mean ``objective`` over ``query_ids`` (the earlier one on a tie)."""
    best: Setting | None = None
    best_value = -np.inf
    for setting, per_query in scores.items():
        value = float(np.mean([per_query[q][objective] for q in query_ids]))
        if value > best_value + 1e-12:
            best, best_value = setting, value
    assert best is not None
    return best


def cross_validate(
    legs: Mapping[str, LegSource],
    qrels: Qrels,
    dense_run: Mapping[str, list[tuple[str, float]]],
    *,
    k: int,
    depth: int,
    chunks: int,
    prefetch: int | None = None,
    rerank: bool = False,
    folds: int = DEFAULT_FOLDS,
    seed: int = 0,
) -> TuneReport:
    """Score every candidate on every query once (:func:`candidate_run`), then pick per fold on the
    others (see the module docstring); the record is the setting picked on all queries."""
    objective = f"mrr@{k}"
    scores: dict[Setting, dict[str, dict[str, float]]] = {}
    for setting in candidate_settings(rerank):
        run = candidate_run(legs, setting, k=k, depth=depth, chunks=chunks, prefetch=prefetch, qrels=qrels)
        scores[setting] = evaluate_per_query(run, qrels, (k,))
    query_ids = sorted(next(iter(scores.values())))
    if not query_ids:
        raise InvalidInputError("no judged query has a relevant document; nothing to tune on")
    dense_scores = evaluate_per_query(dict(dense_run), qrels, (k,))
    held: dict[str, dict[str, float]] = {}
    fold_settings = []
    for fold in kfold(query_ids, folds, seed):
        training = [q for q in query_ids if q not in set(fold)]
        setting = choose(scores, training, objective)
        fold_settings.append(setting)
        held.update({q: scores[setting][q] for q in fold})
        logger.info(
            "fold of %d queries: %s chosen on the other %d", len(fold), setting.describe(), len(training)
        )
    names = [f"{name}@{k}" for name in DEFAULT_METRICS]
    held_out = {name: float(np.mean([held[q][name] for q in query_ids])) for name in names}
    dense = {name: float(np.mean([dense_scores[q][name] for q in query_ids])) for name in names}
    comparison = paired_test(
        [held[q][objective] for q in query_ids], [dense_scores[q][objective] for q in query_ids], seed=seed
    )
    final = choose(scores, query_ids, objective)
    # A deeper --prefetch is refused before --save; the report still shows the record's bound.
    legs_depth = prefetch_depth(depth, prefetch)
    record = RetrievalRecord(final.fusion, min(legs_depth, MAX_PREFETCH), final.rerank_weight)
    return TuneReport(
        held_out, dense, comparison, record, fold_settings, objective, folds, seed, len(query_ids)
    )


def tune(
    evaluation: Evaluation,
    dataset: BeirDataset,
    dense_run: Mapping[str, list[tuple[str, float]]],
    *,
    k: int,
    depth: int,
    split: str = "test",
    prefetch: int | None = None,
    folds: int = DEFAULT_FOLDS,
    seed: int = 0,
) -> TuneReport:
    """Tune the hybrid setting of the collection ``evaluation`` filled (after :meth:`Evaluation.run`,
    whose dense run is the baseline); ``depth`` chunks are fused per query, widened as the modes are."""
    if evaluation.sparse_encoder is None:
        raise InvalidInputError("tuning the hybrid setting needs the collection's sparse encoder")
    kfold(list(dense_run), folds, seed)  # the fold count is checked before any search runs
    queries, qrels = dataset.judged_queries(split)
    retriever = Retriever(
        evaluation.pipeline.store, evaluation.embedder, sparse_encoder=evaluation.sparse_encoder
    )
    reranker = None if evaluation.reranker is None else CrossEncoderReranker(evaluation.reranker)
    # as deep as the table's hybrid row goes, or its reranked rows where a reranker is tuned
    depth_of_legs = prefetch_depth(depth if reranker is None else rerank_candidates(k, depth), prefetch)
    legs = {}
    for number, query in enumerate(queries, start=1):
        legs[query.id] = FetchedLegs(retriever, query.text, reranker)
        legs[query.id](depth_of_legs)  # every candidate starts here; deeper only where one widens
        logger.info("tune: legs of query %d/%d fetched", number, len(queries))
    return cross_validate(
        legs,
        qrels,
        dense_run,
        k=k,
        depth=depth,
        chunks=evaluation.pipeline.store.count(),
        prefetch=prefetch,
        rerank=reranker is not None,
        folds=folds,
        seed=seed,
    )
