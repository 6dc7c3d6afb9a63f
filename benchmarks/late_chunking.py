#!/usr/bin/env python3
"""Late chunking vs per-chunk embedding on the real FAQ sets, with long documents built honestly.

    python benchmarks/late_chunking.py --work DIR [--sets debian-faq-en,perlfaq] [--max-model-len 256]

The BEIR corpora of ``real_datasets.py`` hold one short passage per FAQ answer, which is no test
for late chunking. Here each *source file* of a set (a Debian FAQ chapter, a perlfaq page) becomes
one document: its passages in their source order (parsed from the unpacked package in ``--work``
with ``real_datasets.py``'s own parsers, each passage kept in the first file it appears in, as the
corpus ids were given), joined by blank lines. The chunks are exactly the passages, so each chunk
is still the unit the queries are judged against. Per-chunk: each passage embedded alone (cut to
the model's length, as ``truncate_prompt_tokens=-1``). Late: ``Engine.embed_chunks(document,
passage spans)``, windows of the model's length over longer files. Both rank all passages by
cosine to the query; MRR@10 and nDCG@10 over every judged query.

``--work`` is a folder where ``apt-get download debian-faq perl-doc`` and ``dpkg-deb -x`` put
``x_debian-faq/`` and ``x_perl-doc/`` (``x_<package>``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from common import machine, minilm_path
from real_datasets import docbook_pairs, pod_pairs

from poolrag import Engine, PoolingParams
from poolrag.evaluation.metrics import evaluate

DEFAULT_DATA = Path.home() / ".cache/poolrag/real-data"
SEPARATOR = "\n\n"


def source_files(name: str, work: Path) -> list[list[str]]:
    """Each source file's answer passages, in the order the set's builder read them."""
    if name == "perlfaq":
        pods = sorted((work / "x_perl-doc").glob("usr/share/perl/5.*/pod/perlfaq[1-9].pod"))
        return [[p.answer for p in pod_pairs(pod.read_text(encoding="utf-8"))] for pod in pods]
    language = name.rsplit("-", 1)[1]
    package = "debian-faq" if language == "en" else f"debian-faq-{language}"
    pages = sorted((work / f"x_{package}/usr/share/doc/debian/FAQ").rglob(f"*.{language}.html"))
    pages = [p for p in pages if p.name != f"index.{language}.html"]
    return [[p.answer for p in docbook_pairs(page.read_text(encoding="utf-8"))] for page in pages]


def documents(
    name: str, data: Path, work: Path
) -> tuple[list[tuple[str, list[str], list[tuple[int, int]]]], dict]:
    """(document text, passage ids, passage spans) per source file, and the corpus by id."""
    corpus = {row["text"]: row["_id"] for row in map(json.loads, (data / name / "corpus.jsonl").open())}
    seen: set[str] = set()
    docs = []
    for passages in source_files(name, work):
        ids, spans, parts, at = [], [], [], 0
        for text in passages:
            if text in seen or text not in corpus:
                continue
            seen.add(text)
            ids.append(corpus[text])
            spans.append((at, at + len(text)))
            parts.append(text)
            at += len(text) + len(SEPARATOR)
        if ids:
            docs.append((SEPARATOR.join(parts), ids, spans))
    if len(seen) != len(corpus):
        raise SystemExit(f"{name}: {len(corpus) - len(seen)} corpus passages not found in --work's files")
    return docs, corpus


def judged(name: str, data: Path) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    queries = {row["_id"]: row["text"] for row in map(json.loads, (data / name / "queries.jsonl").open())}
    qrels: dict[str, dict[str, int]] = {}
    for line in next((data / name / "qrels").glob("*.tsv")).read_text().splitlines()[1:]:
        qid, did, grade = line.split("\t")
        qrels.setdefault(qid, {})[did] = int(grade)
    return queries, qrels


def scores(engine: Engine, queries: dict[str, str], ids: list[str], vectors: np.ndarray) -> dict:
    q = engine.embed_array(
        list(queries.values()), PoolingParams(input_type="query", truncate_prompt_tokens=-1)
    )
    sims = q @ vectors.T
    return {
        qid: [(ids[j], float(sims[i, j])) for j in np.argsort(-sims[i])[:10]] for i, qid in enumerate(queries)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default="debian-faq-en,perlfaq")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument(
        "--max-model-len", type=int, default=None, help="the model's window (default its own)"
    )
    args = parser.parse_args()
    engine = Engine(minilm_path(), max_model_len=args.max_model_len, tune="off")
    print(f"machine: {machine()}")
    print(f"model: all-MiniLM-L6-v2 (packaged), window {engine.max_model_len} tokens")
    print("| set | documents | passages | tokens/document (median) | mode | MRR@10 | nDCG@10 | seconds |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.sets.split(","):
        docs, corpus = documents(name, args.data, args.work)
        queries, qrels = judged(name, args.data)
        ids = [i for _, doc_ids, _ in docs for i in doc_ids]
        texts = {i: t for t, i in corpus.items()}
        tokens = int(np.median([len(engine.tokenize(text)) for text, _, _ in docs]))
        started = time.perf_counter()
        document = PoolingParams(input_type="document", truncate_prompt_tokens=-1)
        alone = engine.embed_array([texts[i] for i in ids], document)
        alone_s = time.perf_counter() - started
        started = time.perf_counter()
        late = np.concatenate(
            [
                engine.embed_chunks(text, spans, PoolingParams(input_type="document"))
                for text, _, spans in docs
            ]
        )
        late_s = time.perf_counter() - started
        for mode, vectors, seconds in (("per-chunk", alone, alone_s), ("late", late, late_s)):
            result = evaluate(scores(engine, queries, ids, vectors), qrels, metrics=("mrr", "ndcg"))
            print(
                f"| {name} | {len(docs)} | {len(ids)} | {tokens} | {mode} | {result['mrr@10']:.3f} "
                f"| {result['ndcg@10']:.3f} | {seconds:.1f} |"
            )


if __name__ == "__main__":
    main()
