"""recall@k, MRR@k and nDCG@k against hand computations on a tiny BEIR dataset written to disk."""

from __future__ import annotations

import json
from math import log2
from pathlib import Path

import pytest

from poolrag.errors import InvalidInputError
from poolrag.evaluation import BeirDataset, evaluate, ndcg_at_k, recall_at_k, reciprocal_rank_at_k
from poolrag.evaluation.metrics import evaluate_per_query, ranked_documents


def write_tiny_dataset(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    docs = [{"_id": f"d{i}", "title": f"Title {i}", "text": f"Text of document {i}."} for i in range(1, 6)]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    queries = [{"_id": f"q{i}", "text": f"question {i}"} for i in range(1, 5)]
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    (folder / "qrels").mkdir(exist_ok=True)
    rows = ["query-id\tcorpus-id\tscore", "q1\td1\t2", "q1\td2\t1", "q1\td3\t0", "q2\td4\t1", "q3\td5\t0"]
    rows.append("q4\td2\t1")
    (folder / "qrels" / "test.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder


RUN = {
    "q1": [("d3", 0.9), ("d1", 0.8), ("d5", 0.7), ("d2", 0.6)],
    # d5 and d4 tie: trec_eval puts the larger id first; the second d4 is a duplicate and counts once.
    "q2": [("d4", 0.5), ("d5", 0.5), ("d1", 0.1), ("d4", 0.05)],
    "q3": [("d5", 1.0)],
    # q4 is judged but not answered: it scores 0.
}

# q1 at k=3: ranking d3 d1 d5 → d1 (grade 2) at rank 2; ideal order d1 (2), d2 (1).
Q1_IDEAL = 2 / log2(2) + 1 / log2(3)
Q1_NDCG3 = (2 / log2(3)) / Q1_IDEAL
Q1_NDCG10 = (2 / log2(3) + 1 / log2(5)) / Q1_IDEAL
# q2: ranking d5 d4 d1 → the one relevant doc at rank 2.
Q2_NDCG = (1 / log2(3)) / 1.0


def test_tie_rule_and_duplicates() -> None:
    assert ranked_documents(RUN["q2"]) == ["d5", "d4", "d1"]


def test_per_query_hand_computations(tmp_path: Path) -> None:
    qrels = BeirDataset(write_tiny_dataset(tmp_path / "tiny")).qrels()
    ranking = ranked_documents(RUN["q1"])
    assert recall_at_k(ranking, qrels["q1"], 3) == 0.5
    assert recall_at_k(ranking, qrels["q1"], 10) == 1.0
    assert reciprocal_rank_at_k(ranking, qrels["q1"], 3) == 0.5
    assert reciprocal_rank_at_k(ranking, qrels["q1"], 1) == 0.0
    assert ndcg_at_k(ranking, qrels["q1"], 3) == pytest.approx(Q1_NDCG3)
    assert ndcg_at_k(ranking, qrels["q1"], 10) == pytest.approx(Q1_NDCG10)
    assert ndcg_at_k(["d1", "d2"], qrels["q1"], 10) == pytest.approx(1.0)
    # Grades matter: the grade-1 document first is worse than the grade-2 one first.
    assert ndcg_at_k(["d2", "d1"], qrels["q1"], 10) < 1.0


def test_evaluate_averages_over_judged_queries_and_skips_unjudgeable_ones(tmp_path: Path) -> None:
    qrels = BeirDataset(write_tiny_dataset(tmp_path / "tiny")).qrels()
    per_query = evaluate_per_query(RUN, qrels, k_values=(3,))
    assert set(per_query) == {"q1", "q2", "q4"}  # q3 has no relevant document
    assert per_query["q4"] == {"recall@3": 0.0, "mrr@3": 0.0, "ndcg@3": 0.0}
    scores = evaluate(RUN, qrels, k_values=(3, 10))
    assert list(scores) == ["recall@3", "recall@10", "mrr@3", "mrr@10", "ndcg@3", "ndcg@10"]
    assert scores["recall@3"] == pytest.approx((0.5 + 1.0 + 0.0) / 3)
    assert scores["recall@10"] == pytest.approx((1.0 + 1.0 + 0.0) / 3)
    assert scores["mrr@10"] == pytest.approx((0.5 + 0.5 + 0.0) / 3)
    assert scores["ndcg@3"] == pytest.approx((Q1_NDCG3 + Q2_NDCG + 0.0) / 3)
    assert scores["ndcg@10"] == pytest.approx((Q1_NDCG10 + Q2_NDCG + 0.0) / 3)


def test_a_perfect_run_scores_one_and_an_empty_run_zero(tmp_path: Path) -> None:
    qrels = BeirDataset(write_tiny_dataset(tmp_path / "tiny")).qrels()
    perfect = {qid: [(doc, float(grade)) for doc, grade in judged.items()] for qid, judged in qrels.items()}
    assert evaluate(perfect, qrels) == {"recall@10": 1.0, "mrr@10": 1.0, "ndcg@10": 1.0}
    assert evaluate({}, qrels) == {"recall@10": 0.0, "mrr@10": 0.0, "ndcg@10": 0.0}


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="no relevant"):
        recall_at_k(["d1"], {"d1": 0}, 10)
    with pytest.raises(InvalidInputError, match="k must"):
        ndcg_at_k(["d1"], {"d1": 1}, 0)
    with pytest.raises(InvalidInputError, match="unknown metric"):
        evaluate({}, {"q": {"d": 1}}, metrics=("map",))
    with pytest.raises(InvalidInputError, match="nothing to evaluate"):
        evaluate({}, {"q": {"d": 0}})
