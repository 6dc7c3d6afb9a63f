"""benchmarks/real_hybrid_default.py runs against today's ``cross_validate`` and fuses its ``--tune``
candidates from legs as deep as its default row's, as ``poolrag eval --tune`` does."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import pytest
from benchmark_scripts import load_benchmark

from poolrag.cache import EmbeddingCache
from poolrag.evaluation import BeirDataset
from poolrag.evaluation.tune import Setting, candidate_run
from poolrag.stores.hybrid import DEFAULT_FUSION


@pytest.fixture(scope="module")
def benchmark() -> ModuleType:
    return load_benchmark("real_hybrid_default")


def test_measure_reports_tuned_against_the_dense_row_and_its_default_candidate_is_the_default_row(
    tmp_path: Path, minilm_engine, benchmark: ModuleType
) -> None:
    real_hybrid = load_benchmark("real_hybrid")
    load_benchmark("hybrid_dataset").write(tmp_path / "set", seed=0)
    dataset = BeirDataset(tmp_path / "set")
    with EmbeddingCache(tmp_path / "cache.sqlite") as cache:
        by_query, qrels, chunks = real_hybrid.legs(minilm_engine, cache, dataset, "wordpiece", "english")

    line = benchmark.measure(by_query, qrels, chunks)  # a TypeError when cross_validate's call drifted
    figures = re.fullmatch(
        r"dense (\S+) \| sparse \S+ \| default (\S+) \(\S+\) \| tuned \S+ \(dense (\S+), "
        r"\d+/\d+/\d+, p \S+, all queries: .+\)",
        line,
    )
    assert figures is not None, line
    dense, default, tuned_dense = figures.groups()
    assert tuned_dense == dense  # held out against the dense row, on the same queries

    # --tune's copy of the default fusion scores as the default row: legs cut as deep as that row's
    legs = {q: benchmark._leg_source(d, s) for q, (d, s) in by_query.items()}
    run = candidate_run(legs, Setting(DEFAULT_FUSION), k=10, depth=chunks, chunks=real_hybrid.DEPTH)
    assert f"{real_hybrid.mrr(run, qrels):.4f}" == default
