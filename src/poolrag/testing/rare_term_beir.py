"""A small BEIR folder on which BM25 beats dense: the rare-term half of :mod:`poolrag.testing.hybrid_dataset`.

Its 30 queries each name a part number or a made-up surname that one catalogue or directory entry
holds, among near-twins a dense model cannot tell apart; so tuning on it gives the sparse leg a large
share, far from the default fusion, and the tests can tell a tuned ranking from a default one.
"""

from __future__ import annotations

from pathlib import Path

from poolrag.testing.hybrid_dataset import HybridDataset, build

KINDS = ("catalogue", "directory")


def write_rare_term_beir(folder: Path, seed: int = 0) -> Path:
    """corpus.jsonl (the 150 catalogue and directory entries), queries.jsonl and qrels/test.tsv
    (the 30 rare-term queries) under ``folder``."""
    dataset = build(seed)
    queries = [q for q in dataset.queries if q["metadata"]["kind"] == "rare-term"]
    kept = {q["_id"] for q in queries}
    documents = [d for d in dataset.documents if d["metadata"]["kind"] in KINDS]
    HybridDataset(documents, queries, [qrel for qrel in dataset.qrels if qrel[0] in kept]).save(folder)
    return folder


def tune_and_save(kind: str, root: Path, model: Path) -> tuple[str, dict[str, str]]:
    """The set written under ``root``, then ``poolrag eval --tune --save`` on it into Milvus Lite
    (``kind`` "milvus") or Qdrant local mode: the collection's name and its store's location
    (:func:`poolrag.stores.open_store` keywords)."""
    from poolrag.cli import main
    from poolrag.cli.eval import default_collection

    dataset = write_rare_term_beir(root / "beir")
    where = {"uri": str(root / "m.db")} if kind == "milvus" else {"path": str(root / "q")}
    flag, value = next(iter(where.items()))
    args = ["eval", str(dataset), "--store", kind, f"--{flag}", value, "--model", str(model)]
    args += ["--cache", str(root / "c.sqlite"), "-k", "3", "--chunk-tokens", "32", "-q"]
    code = main([*args, "--modes", "dense", "--tune", "--save"])
    if code != 0:
        raise RuntimeError(f"poolrag eval --tune --save on {dataset} exited with {code}")
    return default_collection(str(dataset)), where
