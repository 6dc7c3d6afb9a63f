#!/usr/bin/env python3
"""``poolrag ingest`` versus the LangChain pipeline a user writes today, whole process each time.

    python benchmarks/ingest_vs_langchain.py [--rounds 3] [--docs 40] [--words 4000] [--before-src DIR]

Contenders, each a fresh ``subprocess`` per run, wall time taken by this (parent) process:

* ``langchain``: ``SentenceTransformersTokenTextSplitter`` (256 tokens, overlap 32) +
  ``HuggingFaceEmbeddings`` + ``QdrantVectorStore.from_documents`` (Qdrant local mode), run as
  ``python benchmarks/ingest_vs_langchain.py --langchain-worker CORPUS STORE``.
* ``poolrag cold``: ``python -m poolrag.cli ingest CORPUS --store qdrant --path STORE --no-cache``.
* ``poolrag warm``: the same with ``--cache FILE``, a cache filled by an untimed earlier run (only
  chunking and upserting remain; LangChain has no embedding cache, so it is compared as is).
* ``poolrag before`` (with ``--before-src DIR``): ``poolrag cold`` with ``PYTHONPATH=DIR``, e.g. the
  ``src`` of a checkout of an earlier commit, to measure a change in the same alternated run.

Runs alternate (L, P-cold, P-warm[, P-before], then the order rotates each round); each run writes
a fresh Qdrant folder; the tables are printed after every round, so a cut-short run still reports.
Reported per contender: chunks stored, tokens embedded (the stored texts re-tokenized with the
MiniLM tokenizer, special tokens included, capped at the model's 256: what the model saw), and the
medians over rounds of wall time, chunks/s and tokens embedded/s of the whole process (interpreter
start, imports, model load, reading, chunking, embedding, writing), plus the ratios poolrag/LangChain.
A second table compares the chunkers on the same corpus (count, tokens per chunk, where cuts fall)
to explain why the chunk counts differ. The machine's CPU and load average are printed too: on a
shared machine, compare ratios within one run only.

Held equal: the corpus (deterministic, ``--docs`` .txt files of ``--words`` words built from the
sentences of ``samples/`` and sentences drawn from their vocabulary), the model (the packaged
all-MiniLM-L6-v2 folder, passed to LangChain as ``model_name``), fp32 on the CPU, the store kind
(Qdrant local mode in a temporary folder), chunk overlap 32 tokens (poolrag repeats them only where
a cut falls inside a sentence). Chunk size: LangChain gets the
256 a user writes; poolrag refuses windows that do not fit the model with its 2 special tokens, so it
gets its default, 254 (LangChain's 256 + 2 special tokens are truncated to 256 by the model).
Batch sizes are each library's default.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import machine, minilm_path

ROOT = Path(__file__).resolve().parents[1]
MODEL_LIMIT = 256
LC_COLLECTION = "langchain"
PR_COLLECTION = "poolrag"


def _model_dir() -> str:
    return str(minilm_path())


def _sample_sentences() -> list[str]:
    sentences: list[str] = []
    for path in sorted((ROOT / "samples").rglob("*")):
        if path.suffix not in (".md", ".txt"):
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if not line or line.startswith(("#", "-", "*", "|", "`", ">")) or line[0].isdigit():
                continue
            sentences.extend(s for s in re.split(r"(?<=[.!?])\s+", line) if len(s.split()) >= 4)
    return sentences


def build_corpus(folder: Path, docs: int, words: int, seed: int = 19) -> int:
    """Write ``docs`` .txt files of about ``words`` words each; return the total word count."""
    rng = random.Random(seed)
    sentences = _sample_sentences()
    vocabulary = sorted({w.strip(".,;:!?()\"'").lower() for s in sentences for w in s.split()} - {""})
    total = 0
    for d in range(docs):
        paragraphs: list[str] = []
        count = 0
        while count < words:
            paragraph: list[str] = []
            for _ in range(rng.randint(3, 9)):
                if rng.random() < 0.5:
                    sentence = rng.choice(sentences)
                else:
                    body = " ".join(rng.choices(vocabulary, k=rng.randint(6, 30)))
                    sentence = body[0].upper() + body[1:] + rng.choice((".", ".", ".", "?", "!"))
                paragraph.append(sentence)
                count += len(sentence.split())
            paragraphs.append(" ".join(paragraph))
        (folder / f"doc{d:03d}.txt").write_text(f"Document {d}\n\n" + "\n\n".join(paragraphs) + "\n")
        total += count
    return total


def langchain_worker(corpus: str, store: str, chunk_tokens: int, overlap: int) -> None:
    from langchain_core.documents import Document
    from langchain_huggingface import HuggingFaceEmbeddings
    from langchain_qdrant import QdrantVectorStore
    from langchain_text_splitters import SentenceTransformersTokenTextSplitter

    model = _model_dir()
    docs = [
        Document(page_content=p.read_text(encoding="utf-8"), metadata={"source": str(p)})
        for p in sorted(Path(corpus).glob("*.txt"))
    ]
    splitter = SentenceTransformersTokenTextSplitter(
        model_name=model, tokens_per_chunk=chunk_tokens, chunk_overlap=overlap
    )
    chunks = splitter.split_documents(docs)
    embeddings = HuggingFaceEmbeddings(model_name=model)
    vs = QdrantVectorStore.from_documents(chunks, embeddings, path=store, collection_name=LC_COLLECTION)
    vs.client.close()


def _stored_texts(store: Path, collection: str, key: str) -> list[str]:
    from qdrant_client import QdrantClient

    client = QdrantClient(path=str(store))
    try:
        texts: list[str] = []
        offset = None
        while True:
            points, offset = client.scroll(collection, limit=1024, offset=offset, with_payload=True)
            texts.extend(p.payload[key] for p in points)
            if offset is None:
                return texts
    finally:
        client.close()


def _run(cmd: list[str], pythonpath: str | None = None) -> float:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="true")
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return seconds


def _token_counts(tokenizer, texts: list[str]) -> list[int]:
    return [len(ids) for ids in tokenizer(texts, add_special_tokens=True)["input_ids"]]


def _cut_stats(texts: list[str], counts: list[int]) -> dict[str, float]:
    n = len(texts)
    ends = sum(1 for t in texts if t.rstrip()[-1:] in ".!?:;")
    return {
        "chunks": n,
        "mean": statistics.fmean(c - 2 for c in counts),
        "median": statistics.median(c - 2 for c in counts),
        "min": min(c - 2 for c in counts),
        "over": sum(1 for c in counts if c > MODEL_LIMIT) / n,
        "sentence_end": ends / n,
    }


def _load() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def _report(
    names: list[str], seconds: dict[str, list[float]], texts: dict[str, list[str]], tokenizer
) -> dict[str, dict]:
    """Print the tables for the runs so far; return the rows."""
    counts = {n: _token_counts(tokenizer, t) for n, t in texts.items()}
    rows = {}
    for name in names:
        if not seconds[name]:
            continue
        n_chunks = len(texts[name])
        embedded = sum(min(c, MODEL_LIMIT) for c in counts[name])
        rows[name] = {
            "chunks": n_chunks,
            "tokens": embedded,
            "seconds": statistics.median(seconds[name]),
            "chunks_s": statistics.median(n_chunks / s for s in seconds[name]),
            "tokens_s": statistics.median(embedded / s for s in seconds[name]),
            "runs": seconds[name],
        }
    print()
    print("| contender | chunks | tokens embedded | wall s (median) | chunks/s | tokens/s | runs (s) |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name, row in rows.items():
        runs = ", ".join(f"{s:.1f}" for s in row["runs"])
        print(
            f"| {name} | {row['chunks']:,} | {row['tokens']:,} | {row['seconds']:.1f} | "
            f"{row['chunks_s']:.1f} | {row['tokens_s']:,.0f} | {runs} |"
        )
    print()
    lc = rows.get("langchain")
    for name in names[1:]:
        pr = rows.get(name)
        if lc is None or pr is None:
            continue
        print(
            f"{name} / langchain: chunks/s {pr['chunks_s'] / lc['chunks_s']:.2f}x, "
            f"tokens embedded/s {pr['tokens_s'] / lc['tokens_s']:.2f}x, wall time "
            f"{lc['seconds'] / pr['seconds']:.2f}x shorter"
        )
    before, cold = rows.get("poolrag before"), rows.get("poolrag cold")
    if before is not None and cold is not None:
        print(
            f"poolrag cold / poolrag before: wall time {before['seconds'] / cold['seconds']:.2f}x shorter, "
            f"tokens embedded/s {cold['tokens_s'] / before['tokens_s']:.2f}x"
        )
    print()
    print(
        "| chunker | chunks | mean tokens/chunk | median | min | > 256 incl. specials (truncated) "
        "| ends at . ! ? : ; |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    labels = {
        "poolrag cold": "poolrag TokenChunker",
        "poolrag before": "poolrag TokenChunker (before)",
        "langchain": "SentenceTransformersTokenTextSplitter",
    }
    for name, label in labels.items():
        if name not in texts:
            continue
        st = _cut_stats(texts[name], counts[name])
        print(
            f"| {label} | {st['chunks']:,} | {st['mean']:.1f} | {st['median']:.0f} | {st['min']} | "
            f"{st['over']:.1%} | {st['sentence_end']:.1%} |"
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="alternated runs per contender (default 3)")
    parser.add_argument("--docs", type=int, default=40, help="documents in the corpus (default 40)")
    parser.add_argument("--words", type=int, default=4000, help="words per document (default 4000)")
    parser.add_argument("--chunk-tokens", type=int, default=256, help="LangChain tokens_per_chunk")
    parser.add_argument("--poolrag-chunk-tokens", type=int, default=None, help="default: poolrag's (254)")
    parser.add_argument("--overlap", type=int, default=32)
    parser.add_argument("--before-src", help="also run poolrag cold with PYTHONPATH=DIR (an earlier src)")
    parser.add_argument("--langchain-worker", nargs=2, metavar=("CORPUS", "STORE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.langchain_worker:
        langchain_worker(*args.langchain_worker, args.chunk_tokens, args.overlap)
        return 0

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(_model_dir())
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="poolrag-vs-lc-") as tmp:
        root = Path(tmp)
        corpus = root / "corpus"
        corpus.mkdir()
        words = build_corpus(corpus, args.docs, args.words)
        print(f"corpus: {args.docs} documents, {words} words", flush=True)
        pr_chunking = ["--overlap", str(args.overlap)]
        if args.poolrag_chunk_tokens:
            pr_chunking += ["--chunk-tokens", str(args.poolrag_chunk_tokens)]
        cache = root / "cache.sqlite"
        run_id = 0

        def command(name: str, store: Path) -> list[str]:
            if name == "langchain":
                worker = [py, __file__, "--langchain-worker", str(corpus), str(store)]
                return [*worker, "--chunk-tokens", str(args.chunk_tokens), "--overlap", str(args.overlap)]
            ingest = [py, "-m", "poolrag.cli", "ingest", str(corpus), "--store", "qdrant", "--path"]
            ingest += [str(store), "--collection", PR_COLLECTION, "-q", "--json", *pr_chunking]
            ingest += ["--model", _model_dir()]  # the folder LangChain gets
            ingest += ["--checkpoint", str(store.parent / f"{store.name}.ckpt")]
            return ingest + (["--no-cache"] if name == "poolrag cold" else ["--cache", str(cache)])

        # Fill the cache for the warm runs (untimed).
        _run(command("poolrag warm", root / "prime"))
        shutil.rmtree(root / "prime", ignore_errors=True)

        names = ["langchain", "poolrag cold", "poolrag warm"]
        if args.before_src:
            names.append("poolrag before")
        seconds: dict[str, list[float]] = {n: [] for n in names}
        texts: dict[str, list[str]] = {}
        print(f"machine: {machine()}", flush=True)
        for r in range(args.rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                run_id += 1
                store = root / f"run{run_id}"
                if name == "poolrag before":
                    cmd, path = command("poolrag cold", store), args.before_src
                else:
                    cmd, path = command(name, store), None
                seconds[name].append(_run(cmd, path))
                print(f"round {r + 1}: {name:14s} {seconds[name][-1]:7.1f} s (load {_load()})", flush=True)
                if name not in texts:
                    coll, key = (
                        (LC_COLLECTION, "page_content") if name == "langchain" else (PR_COLLECTION, "text")
                    )
                    texts[name] = _stored_texts(store, coll, key)
                shutil.rmtree(store, ignore_errors=True)
            rows = _report(names, seconds, texts, tokenizer)
            print(f"after round {r + 1}: load average {_load()}", flush=True)

    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
