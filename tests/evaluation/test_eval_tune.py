"""``poolrag.evaluation.tune``: the folds, the paired test, local fusion of fetched legs, a candidate's
run widened as the table's rows are, and the cross-validation's choice, on legs written by hand so
every expected value can be worked out."""

from __future__ import annotations

import numpy as np
import pytest

from poolrag.errors import InvalidInputError
from poolrag.evaluation.run import CORPUS_ID_KEY
from poolrag.evaluation.tune import (
    LegSource,
    QueryLegs,
    Setting,
    candidate_run,
    candidate_settings,
    cross_validate,
    kfold,
    paired_test,
)
from poolrag.stores.base import StoreHit
from poolrag.stores.hybrid import DEFAULT_FUSION, fuse_legs


def test_folds_cover_every_query_once_in_near_equal_parts_and_depend_only_on_ids_and_seed() -> None:
    ids = [f"q{i}" for i in range(23)]
    folds = kfold(ids, 5, seed=7)
    assert sorted(q for fold in folds for q in fold) == sorted(ids)
    assert sorted(len(fold) for fold in folds) == [4, 4, 5, 5, 5]
    assert kfold(list(reversed(ids)), 5, seed=7) == folds  # input order does not matter
    assert kfold(ids, 5, seed=8) != folds


def test_fold_counts_that_cannot_work_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="at least 2"):
        kfold(["a", "b"], 1)
    with pytest.raises(
        InvalidInputError, match="5-fold cross-validation needs at least 5 judged queries, got 3"
    ):
        kfold(["a", "b", "c"], 5)


def test_identical_systems_tie_everywhere_with_p_one() -> None:
    scores = [0.0, 0.5, 1.0, 0.25, 1.0]
    result = paired_test(scores, scores)
    assert (result.wins, result.ties, result.losses) == (0, 5, 0)
    assert result.p_value == 1.0 and result.mean_difference == 0.0


def test_a_uniformly_better_system_wins_everywhere_with_a_small_p() -> None:
    baseline = np.linspace(0.1, 0.6, 20)
    result = paired_test(baseline + 0.3, baseline)
    assert (result.wins, result.ties, result.losses) == (20, 0, 0)
    assert result.mean_difference == pytest.approx(0.3)
    assert result.p_value < 0.001  # only the all-positive flips (2^-20 of them) reach the observed mean


def test_mixed_differences_count_wins_ties_losses_and_a_large_p() -> None:
    system = [1.0, 0.5, 0.0, 1.0, 0.5, 0.5]
    baseline = [0.5, 1.0, 0.0, 0.5, 1.0, 0.5]
    result = paired_test(system, baseline, seed=3)
    assert (result.wins, result.ties, result.losses) == (2, 2, 2)
    assert result.p_value > 0.5
    assert paired_test(system, baseline, seed=3) == result  # seeded: the same p every run


def _hit(chunk: str, score: float) -> StoreHit:
    return StoreHit(chunk, score, {CORPUS_ID_KEY: chunk.split("#")[0]})


def fused_documents(legs: QueryLegs, setting: Setting, depth: int) -> list[tuple[str, float]]:
    """The document run of one query whose legs are ``legs``, ``depth`` chunks fused (no widening:
    the collection holds no more)."""
    return candidate_run({"q": lambda _: legs}, setting, k=1, depth=depth, chunks=depth)["q"]


def test_fused_documents_fuse_by_the_stores_rules_and_credit_a_document_its_best_chunk() -> None:
    legs = QueryLegs(
        dense=[_hit("d1#0", 0.9), _hit("d2#0", 0.8), _hit("d1#1", 0.7)],
        sparse=[_hit("d3#0", 12.0), _hit("d2#0", 4.0)],
    )
    for fusion in [("minmax", 0.3), "rrf", "dbsf", ("weighted", 0.8)]:
        hits = fuse_legs(legs.dense, legs.sparse, 3, fusion)
        best: dict[str, float] = {}
        for hit in hits:
            doc = hit.payload[CORPUS_ID_KEY]
            best[doc] = max(best.get(doc, -np.inf), hit.score)
        assert fused_documents(legs, Setting(fusion), 3) == sorted(best.items(), key=lambda p: -p[1])
    # Sparse share 0 is dense alone: dense order, the sparse-only document never ahead of a dense hit.
    assert [d for d, _ in fused_documents(legs, Setting(("minmax", 0.0)), 3)] == ["d1", "d2"]


def test_a_rerank_share_reorders_the_fused_chunks_by_the_cross_encoder() -> None:
    legs = QueryLegs(
        dense=[_hit("a#0", 0.9), _hit("b#0", 0.5), _hit("c#0", 0.1)],
        sparse=[],
        rerank_scores={"a#0": -3.0, "b#0": 1.0, "c#0": 5.0},
    )
    assert [d for d, _ in fused_documents(legs, Setting(("minmax", 0.0), 0.0), 3)] == ["a", "b", "c"]
    assert [d for d, _ in fused_documents(legs, Setting(("minmax", 0.0), 1.0), 3)] == ["c", "b", "a"]


def test_a_rerank_share_reranks_the_candidates_search_reranks_not_only_the_chunks_kept() -> None:
    """poolrag search --rerank -k 3 reranks max(10k, 50) = 50 stage-1 candidates; a candidate with a
    reranker share reranked only the 3 chunks it kept, so a share chosen (and saved) there was
    scored on a chunk search's cross-encoder lifts from 40th place it never saw. Its legs are now
    fetched 50 deep and all 50 fused chunks reranked, the first 3 kept."""
    dense = [_hit(f"d{i}#0", 1.0 - i / 100) for i in range(60)]
    scores = {hit.id: 0.0 for hit in dense} | {"d40#0": 9.0}
    asked: list[int] = []

    def source(depth: int) -> QueryLegs:
        asked.append(depth)
        return QueryLegs(dense[:depth], [], {h.id: scores[h.id] for h in dense[:depth]})

    run = candidate_run({"q": source}, Setting(("minmax", 0.0), 1.0), k=3, depth=3, chunks=60)
    assert [doc for doc, _ in run["q"]][:1] == ["d40"] and len(run["q"]) == 3
    assert asked == [50]
    asked.clear()
    run = candidate_run({"q": source}, Setting(("minmax", 0.0)), k=3, depth=3, chunks=60)
    assert [doc for doc, _ in run["q"]] == ["d0", "d1", "d2"] and asked == [50]  # no share: the 3 kept


def test_a_candidate_run_widens_until_k_documents_remain_fetching_deeper_legs_as_the_table_does() -> None:
    """One long document fills the first 3k chunks (and the legs' first 50): the run widens 9, 18,
    36, then every one of the 62 chunks, as the table's rows widen, and asks for legs that deep."""
    dense = [_hit(f"long#{i}", 1.0 - i / 100) for i in range(60)] + [_hit("b#0", 0.3), _hit("c#0", 0.2)]
    sparse = [_hit("c#0", 5.0), _hit("long#0", 1.0)]
    asked: list[int] = []

    def source(depth: int) -> QueryLegs:
        asked.append(depth)
        return QueryLegs(dense[:depth], sparse[:depth])

    run = candidate_run({"q": source}, Setting(("minmax", 0.0)), k=3, depth=9, chunks=len(dense))
    assert [doc for doc, _ in run["q"]] == ["long", "b", "c"]  # dense alone: dense's order
    assert asked == [50, 50, 50, 62]
    asked.clear()
    run = candidate_run({"q": source}, Setting("rrf"), k=3, depth=9, chunks=len(dense), prefetch=20)
    assert [doc for doc, _ in run["q"]] == ["long", "c"]  # legs 20 deep hold no third document
    assert asked == [20, 20, 20]  # --prefetch fixes the legs: 21 chunks in all, short of 36


def _fixed(legs: dict[str, QueryLegs]) -> dict[str, LegSource]:
    """Legs written by hand, whole at every depth asked."""
    return {
        query_id: (lambda _depth, query_legs=query_legs: query_legs) for query_id, query_legs in legs.items()
    }


def test_dense_alone_comes_first_among_candidates_and_rerank_shares_only_with_a_reranker() -> None:
    plain = candidate_settings()
    assert plain[0] == Setting(("minmax", 0.0))
    assert plain[1] == Setting(DEFAULT_FUSION), "the untuned default is tried right after dense alone"
    assert len(set(plain)) == len(plain)
    assert all(s.rerank_weight is None for s in plain)
    reranked = candidate_settings(rerank=True)
    assert reranked[0] == Setting(("minmax", 0.0), 0.0)
    assert {s.rerank_weight for s in reranked} == {0.0, 0.25, 0.5, 0.75, 1.0}


def _sparse_wins_set(queries: int) -> tuple[dict[str, QueryLegs], dict, dict]:
    """Dense puts a wrong document first every time; the sparse leg puts the right one first, by a
    wide margin; so any real sparse share moves the right document to the top."""
    legs, qrels, dense_run = {}, {}, {}
    for i in range(queries):
        right, wrong = f"r{i}", f"w{i}"
        legs[f"q{i}"] = QueryLegs(
            dense=[_hit(f"{wrong}#0", 0.9), _hit(f"{right}#0", 0.85), _hit(f"x{i}#0", 0.1)],
            sparse=[_hit(f"{right}#0", 20.0), _hit(f"x{i}#0", 1.0)],
        )
        qrels[f"q{i}"] = {right: 1}
        dense_run[f"q{i}"] = [(wrong, 0.9), (right, 0.85), (f"x{i}", 0.1)]
    return legs, qrels, dense_run


def test_cross_validation_picks_sparse_where_it_wins_and_reports_held_out_scores() -> None:
    legs, qrels, dense_run = _sparse_wins_set(12)
    report = cross_validate(
        _fixed(legs), qrels, dense_run, k=3, depth=3, chunks=3, prefetch=3, folds=4, seed=0
    )
    assert report.dense["mrr@3"] == pytest.approx(0.5)
    assert report.held_out["mrr@3"] == pytest.approx(1.0)
    assert set(report.held_out) == {"recall@3", "mrr@3", "ndcg@3"}
    assert (report.comparison.wins, report.comparison.ties, report.comparison.losses) == (12, 0, 0)
    assert report.comparison.p_value < 0.01
    # Min-max puts the right document at 0.9375 on dense and 1 on sparse, the wrong one at 1 and 0: it
    # wins from a sparse share of 1/17 on, and the smallest share that wins is chosen (ties keep the
    # earlier candidate), 0.1 on the grid.
    assert report.record.fusion == ("minmax", 0.1) and report.record.prefetch == 3
    assert len(report.fold_settings) == 4


def test_where_sparse_never_helps_the_choice_is_dense_alone_and_never_below_it() -> None:
    legs, qrels, dense_run = {}, {}, {}
    for i in range(10):
        legs[f"q{i}"] = QueryLegs(
            dense=[_hit(f"r{i}#0", 0.9), _hit(f"w{i}#0", 0.2)], sparse=[_hit(f"w{i}#0", 9.0)]
        )
        qrels[f"q{i}"] = {f"r{i}": 1}
        dense_run[f"q{i}"] = [(f"r{i}", 0.9), (f"w{i}", 0.2)]
    report = cross_validate(_fixed(legs), qrels, dense_run, k=2, depth=2, chunks=2, prefetch=2, folds=5)
    assert report.record.fusion == ("minmax", 0.0)
    assert report.held_out == report.dense
    assert report.comparison.p_value == 1.0 and report.comparison.ties == 10


def test_candidates_leave_out_a_query_s_own_unjudged_document_as_the_table_s_rows_do() -> None:
    """Where each query is a corpus document under the same id (ArguAna, Quora), the table's rows
    leave that document out (:func:`~poolrag.evaluation.run.without_own_document`); so do the
    candidates, or dense alone would score below the dense row it is."""
    legs, qrels, dense_run = {}, {}, {}
    for i in range(5):
        query = f"q{i}"
        legs[query] = QueryLegs(
            dense=[_hit(f"{query}#0", 1.0), _hit(f"r{i}#0", 0.8), _hit(f"w{i}#0", 0.5)],
            sparse=[_hit(f"w{i}#0", 9.0)],
        )
        qrels[query] = {f"r{i}": 1}
        dense_run[query] = [(f"r{i}", 0.8), (f"w{i}", 0.5)]  # the dense row: its own document left out
    report = cross_validate(_fixed(legs), qrels, dense_run, k=2, depth=3, chunks=3, prefetch=3, folds=5)
    assert report.record.fusion == ("minmax", 0.0)
    assert report.held_out == report.dense == {"recall@2": 1.0, "mrr@2": 1.0, "ndcg@2": 1.0}
