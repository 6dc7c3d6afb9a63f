"""Work avoided in the last layer for CLS-pooled embedders and cross-encoders: before vs after.

    python benchmarks/work_avoided.py [--n 400] [--n-score 200] [--passes 9] [--threads 1]

One model per row; "before" computes every row of the last layer (the runner's
``first_row_tasks`` empty, the classifier's ``classifier_first_rows`` off), "after" only each
sequence's first row past attention. Both run the same length-sorted 4,096-token batches
through the runner's forward (the engine's batches, without its threads, so that the ratio is
the model's), passes interleaved. Prints texts/s, the ratio and the largest absolute difference
between the two outputs (the math per row is unchanged: expect 0).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from common import cross_encoder_path, interleaved, machine, table
from corpus import mixed_corpus, queries

from poolrag.testing import engine_internals as internals

BATCH_TOKENS = 4096


def bge_small_path() -> Path:
    """The bge-small-en-v1.5 test asset (real weights, BERT, CLS pooling, 12 layers)."""
    from build_test_assets import ensure_assets

    return ensure_assets() / "bge-small-en-v1.5"


def _batches(requests: Sequence[object]) -> list[list[object]]:
    ordered = sorted(requests, key=lambda r: -r.num_tokens)  # type: ignore[attr-defined]
    batches: list[list[object]] = [[]]
    tokens = 0
    for request in ordered:
        if tokens + request.num_tokens > BATCH_TOKENS and batches[-1]:  # type: ignore[attr-defined]
            batches.append([])
            tokens = 0
        batches[-1].append(request)
        tokens += request.num_tokens  # type: ignore[attr-defined]
    return batches


def _compare(label: str, runner: object, requests: Sequence[object], switch: Callable[[bool], None],
             pooled: Callable[[object], torch.Tensor], passes: int) -> list[object]:  # fmt: skip
    batches = _batches(requests)

    def run(on: bool) -> torch.Tensor:
        switch(on)
        return torch.cat([pooled(runner.forward(b)) for b in batches])  # type: ignore[attr-defined]

    delta = float((run(False) - run(True)).abs().max())
    times = interleaved({"before": lambda: run(False), "after": lambda: run(True)}, passes)
    n = len(requests)
    return [label, n, n / times["before"], n / times["after"], times["before"] / times["after"], delta]


def embed_row(n: int, passes: int) -> list[object]:
    from poolrag import Engine
    from poolrag.pooling.methods import CLSPool
    from poolrag.request import ResolvedParams

    engine = Engine(bge_small_path())
    assert engine.pooler_config.pooling_type == "CLS"
    runner = internals.runner(engine)
    runner.prepare_for_serving()
    requests = internals.processor(engine).texts(mixed_corpus(n), ResolvedParams(task="embed"), None, None)

    def switch(on: bool) -> None:
        runner.first_row_tasks = frozenset({"embed", "score"}) if on else frozenset()

    return _compare("bge-small-en-v1.5 embed (CLS)", runner, requests, switch,
                    lambda out: CLSPool()(out.tokens), passes)  # fmt: skip


def score_row(n: int, passes: int) -> list[object]:
    from poolrag import Engine
    from poolrag.request import ResolvedParams

    engine = Engine(cross_encoder_path())
    runner = internals.runner(engine)
    runner.prepare_for_serving()
    query = queries(1, seed=7)[0]
    processor = internals.processor(engine)
    pairs = [(query, passage) for passage in mixed_corpus(n, seed=11)]
    requests = processor.pairs(pairs, ResolvedParams(task="score"), None)

    def switch(on: bool) -> None:
        runner.model.classifier_first_rows = on

    return _compare(f"ms-marco-MiniLM-L-12-v2 score 1×{n}", runner, requests, switch,
                    lambda out: out.sequences, passes)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--n-score", type=int, default=200)
    parser.add_argument("--passes", type=int, default=9)
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.WARNING)
    print(machine())
    headers = ["model / task", "texts", "before texts/s", "after texts/s", "after / before", "max |Δ|"]
    rows = [embed_row(args.n, args.passes)]
    print(table(headers, rows), flush=True)  # the first row on its own: a run cut short keeps it
    rows.append(score_row(args.n_score, args.passes))
    print(table(headers, rows))


if __name__ == "__main__":
    main()
