"""benchmarks/hybrid_eval.py asks ``Evaluation.run`` only for modes a fresh collection can measure:
``saved`` (added to ``EVAL_MODES`` for ``--tune --save``) needs a tuned setting it never writes."""

from __future__ import annotations

import json
from pathlib import Path

from benchmark_scripts import load_benchmark

from poolrag import Engine
from poolrag.evaluation import BeirDataset


def _tiny_set(root: Path) -> BeirDataset:
    docs = {
        "d1": "The ZX-4410 router resets when its power button is held for ten seconds.",
        "d2": "Cats sleep for most of the day and hunt at dusk.",
        "d3": "A sourdough starter needs flour and water every day to stay alive.",
    }
    queries = {"q1": "how do I reset the ZX-4410", "q2": "feeding a bread starter"}
    root.mkdir()
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in docs.items())
    )
    (root / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in queries.items())
    )
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td3\t1\n")
    return BeirDataset(root)


def test_the_reranked_table_runs_on_a_fresh_collection(tmp_path: Path, minilm_engine, assets: Path) -> None:
    benchmark = load_benchmark("hybrid_eval")
    reranker = Engine(assets / "ms-marco-MiniLM-L-12-v2")
    modes = benchmark.eval_modes(rerank=True)
    dataset = _tiny_set(tmp_path / "set")

    # at HEAD: InvalidInputError "mode saved measures the setting a collection saved ... holds none"
    report, _, _ = benchmark._evaluate("qdrant", tmp_path, dataset, minilm_engine, reranker, modes, None)
    assert (
        set(report.metrics)
        == set(modes)
        == {"dense", "sparse", "hybrid", "hybrid+rerank", "hybrid+rerank-replace"}
    )
    assert report.metrics["hybrid+rerank"]["mrr@10"] == 1.0
