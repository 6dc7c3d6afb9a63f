"""Ranking metrics — recall@k, MRR@k, nDCG@k — defined as BEIR (through pytrec_eval / trec_eval) does.

Numbers are only worth printing if they can be compared with published BEIR tables, so the
definitions follow trec_eval rather than a variant:

- a run is ordered by score, best first, equal scores by document id in *descending* order
  (trec_eval's tie rule), and a document retrieved twice counts once, at its best place;
- a document is relevant when its judgement is >= 1; nDCG's gain is the judgement itself
  (graded), discounted by ``log2(rank + 1)``, over the ideal order of *all* judged documents;
- queries with no relevant document are skipped (every metric is undefined for them);
- one deliberate difference: a judged query that the run does not answer at all scores 0
  (trec_eval's ``-c``), so a mode that returns nothing cannot look better than one that tries.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

from poolrag.counts import check_count
from poolrag.errors import InvalidInputError

Qrels = Mapping[str, Mapping[str, int]]
"""query id → document id → graded judgement (0 = judged not relevant)."""
Run = Mapping[str, Sequence[tuple[str, float]]]
"""query id → the retrieved (document id, score) pairs, in any order."""

DEFAULT_METRICS = ("recall", "mrr", "ndcg")


def ranked_documents(scored: Iterable[tuple[str, float]]) -> list[str]:
    """Document ids best first, with trec_eval's tie rule; repeated ids keep only their best place."""
    ordered = sorted(scored, key=lambda pair: pair[0], reverse=True)
    ordered.sort(key=lambda pair: pair[1], reverse=True)  # stable: equal scores stay id-descending
    return list(dict.fromkeys(doc_id for doc_id, _ in ordered))


def _relevant(judgements: Mapping[str, int]) -> set[str]:
    relevant = {doc_id for doc_id, grade in judgements.items() if grade >= 1}
    if not relevant:
        raise InvalidInputError("the query has no relevant document; ranking metrics are undefined for it")
    return relevant


def recall_at_k(ranking: Sequence[str], judgements: Mapping[str, int], k: int) -> float:
    """Share of the query's relevant documents found in the top ``k``."""
    check_count(k, "k")
    relevant = _relevant(judgements)
    return len(relevant.intersection(ranking[:k])) / len(relevant)


def reciprocal_rank_at_k(ranking: Sequence[str], judgements: Mapping[str, int], k: int) -> float:
    """``1 / rank`` of the first relevant document in the top ``k``, 0 when there is none."""
    check_count(k, "k")
    relevant = _relevant(judgements)
    for rank, doc_id in enumerate(ranking[:k], start=1):
        if doc_id in relevant:
            return 1.0 / rank
    return 0.0


def ndcg_at_k(ranking: Sequence[str], judgements: Mapping[str, int], k: int) -> float:
    """Discounted cumulative gain of the top ``k`` over that of the best possible top ``k``."""
    check_count(k, "k")
    _relevant(judgements)
    dcg = sum(
        max(judgements.get(doc_id, 0), 0) / math.log2(rank + 1)
        for rank, doc_id in enumerate(ranking[:k], start=1)
    )
    ideal_gains = sorted((grade for grade in judgements.values() if grade > 0), reverse=True)[:k]
    ideal = sum(gain / math.log2(rank + 1) for rank, gain in enumerate(ideal_gains, start=1))
    return dcg / ideal


METRICS: dict[str, Callable[[Sequence[str], Mapping[str, int], int], float]] = {
    "recall": recall_at_k,
    "mrr": reciprocal_rank_at_k,
    "ndcg": ndcg_at_k,
}


def evaluate_per_query(
    run: Run, qrels: Qrels, k_values: Sequence[int] = (10,), metrics: Sequence[str] = DEFAULT_METRICS
) -> dict[str, dict[str, float]]:
    """Every metric for every judged query with a relevant document: ``{qid: {"ndcg@10": ...}}``.

    Per-query values let a report say *where* one mode gains over another (e.g. rare-term queries
    against paraphrases), which an average hides.
    """
    unknown = [name for name in metrics if name not in METRICS]
    if unknown:
        raise InvalidInputError(f"unknown metric(s) {unknown}; choose from {sorted(METRICS)}")
    for k in k_values:
        check_count(k, "k")
    results: dict[str, dict[str, float]] = {}
    for query_id, judgements in qrels.items():
        if not any(grade >= 1 for grade in judgements.values()):
            continue
        ranking = ranked_documents(run.get(query_id, ()))
        results[query_id] = {
            f"{name}@{k}": METRICS[name](ranking, judgements, k) for name in metrics for k in k_values
        }
    return results


def evaluate(
    run: Run, qrels: Qrels, k_values: Sequence[int] = (10,), metrics: Sequence[str] = DEFAULT_METRICS
) -> dict[str, float]:
    """Each metric averaged over the judged queries: ``{"recall@10": ..., "mrr@10": ..., "ndcg@10": ...}``."""
    per_query = evaluate_per_query(run, qrels, k_values, metrics)
    if not per_query:
        raise InvalidInputError("no query in the qrels has a relevant document; nothing to evaluate")
    names = [f"{name}@{k}" for name in metrics for k in k_values]
    return {name: sum(values[name] for values in per_query.values()) / len(per_query) for name in names}
