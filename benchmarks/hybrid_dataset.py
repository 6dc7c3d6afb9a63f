#!/usr/bin/env python3
"""Write the hybrid benchmark's dataset (:mod:`poolrag.testing.hybrid_dataset`) in the BEIR layout.

    python benchmarks/hybrid_dataset.py OUT_DIR [--seed 0]

writes ``OUT_DIR/corpus.jsonl``, ``OUT_DIR/queries.jsonl`` and ``OUT_DIR/qrels/test.tsv``
(~300 documents, 60 queries: 30 rare-term, 30 paraphrase), for ``poolrag eval`` to compare
dense, sparse and hybrid retrieval. The generator lives in poolrag.testing, where the tests of
poolrag and of its partner packages reach it; this script is its command line.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from poolrag.testing.hybrid_dataset import HybridDataset, build, write

__all__ = ["HybridDataset", "build", "main", "write"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder to write corpus.jsonl, queries.jsonl, qrels/test.tsv")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    dataset = write(args.out, args.seed)
    kinds = [q["metadata"]["kind"] for q in dataset.queries]  # type: ignore[index]
    print(
        f"{args.out}: {len(dataset.documents)} documents, {len(dataset.queries)} queries "
        f"({kinds.count('rare-term')} rare-term, {kinds.count('paraphrase')} paraphrase)"
    )


if __name__ == "__main__":
    main()
