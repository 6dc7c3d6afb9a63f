"""Work avoided in the last layer for CLS-pooled embedders and cross-encoders: before vs after.

    python benchmarks/work_avoided.py [--n 1000] [--passes 3]

Both contenders are one engine: "before" computes every row of the last layer (the runner's
``first_row_tasks`` empty, the classifier's ``classifier_first_rows`` off), "after" only each
sequence's first row past attention. Passes are interleaved; prints texts/s, the ratio and the
largest absolute difference between the two outputs (the math per row is the same: expect 0).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
from common import cross_encoder_path, interleaved, machine, table
from corpus import mixed_corpus, queries


def bge_small_path() -> Path:
    """The bge-small-en-v1.5 test asset (real weights, BERT, CLS pooling, 12 layers)."""
    from build_test_assets import ensure_assets

    return ensure_assets() / "bge-small-en-v1.5"


def _compare(
    label: str, n: int, run: Callable[[], np.ndarray], switch: Callable[[bool], None], passes: int
) -> list[object]:
    switch(False)
    before = run()
    switch(True)
    after = run()
    delta = float(np.abs(before - after).max())

    def contender(on: bool) -> Callable[[], object]:
        def go() -> object:
            switch(on)
            return run()

        return go

    times = interleaved({"before": contender(False), "after": contender(True)}, passes)
    return [label, n, n / times["before"], n / times["after"], times["before"] / times["after"], delta]


def embed_row(n: int, passes: int) -> list[object]:
    from poolrag import Engine

    texts = mixed_corpus(n)
    engine = Engine(bge_small_path())
    runner = engine._pipeline.executor.runner
    assert engine._pipeline.pooler_config.pooling_type == "CLS"

    def switch(on: bool) -> None:
        runner.first_row_tasks = frozenset({"embed", "score"}) if on else frozenset()

    return _compare("bge-small embed (CLS)", n, lambda: engine.embed_array(texts), switch, passes)


def score_row(n: int, passes: int) -> list[object]:
    from poolrag import Engine

    query = queries(1, seed=7)[0]
    passages = mixed_corpus(n, seed=11)
    engine = Engine(cross_encoder_path())
    model = engine._pipeline.executor.runner.model

    def switch(on: bool) -> None:
        model.classifier_first_rows = on

    run = lambda: np.asarray(engine.score_array(query, passages))  # noqa: E731
    return _compare(f"ms-marco-MiniLM-L-12 score 1×{n}", n, run, switch, passes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--n-score", type=int, default=300)
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print(machine())
    rows = [embed_row(args.n, args.passes), score_row(args.n_score, args.passes)]
    headers = ["model / task", "texts", "before texts/s", "after texts/s", "after / before", "max |Δ|"]
    print(table(headers, rows))


if __name__ == "__main__":
    main()
