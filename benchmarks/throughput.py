"""Offline throughput, poolrag vs sentence-transformers, same process, same model, same corpus.

    python benchmarks/throughput.py [--n 2000] [--passes 3] [--fast-mode bf16] [--tasks embed,score]
                                    [--json rows.json]

* embed: all-MiniLM-L6-v2 on the deterministic mixed corpus (benchmarks/corpus.py; within the
  model's 256-token limit, so nothing is truncated by either engine);
* score: rerank 1 query × 100 passages with the ms-marco-MiniLM-L-12-v2 cross-encoder;
* token_embed: per-token vectors of the corpus (sentence-transformers: output_value="token_embeddings").

Prints texts/s and tokens/s (median of ``--passes``, contenders interleaved), the ratio and the
largest absolute difference between the two engines' outputs. The run that computes that difference
is each contender's warm-up. ``--json`` also writes the machine and the rows as fields, for plots
(notebooks/05_throughput.ipynb).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import numpy as np
from common import cross_encoder_path, interleaved, machine, machine_facts, minilm_path, table
from corpus import mixed_corpus, queries


def embed_rows(n: int, passes: int, fast_mode: str | None) -> list[list[object]]:
    from sentence_transformers import SentenceTransformer

    from poolrag import Engine

    texts = mixed_corpus(n)
    path = minilm_path()
    engine = Engine(path, cpu_fast_mode=fast_mode)
    st = SentenceTransformer(str(path), device="cpu")
    tokens = sum(len(ids) for ids in engine.tokenizer(texts)["input_ids"])
    ours = engine.embed_array(texts)
    theirs = st.encode(texts, batch_size=32)
    delta = float(np.abs(ours - theirs).max())
    cosine = f"{(ours * theirs).sum(axis=1).min():.6f}"
    times = interleaved(
        {"poolrag": lambda: engine.embed_array(texts), "st": lambda: st.encode(texts, batch_size=32)},
        passes,
        warmup=0,  # the agreement run above warmed both up
    )
    label = f"embed ({fast_mode or 'fp32'})"
    return [
        [label, "poolrag", n, tokens, n / times["poolrag"], tokens / times["poolrag"],
         times["st"] / times["poolrag"], delta, cosine],
        [label, "sentence-transformers b32", n, tokens, n / times["st"], tokens / times["st"], 1.0, "", ""],
    ]  # fmt: skip


def score_rows(passes: int) -> list[list[object]]:
    from sentence_transformers import CrossEncoder

    from poolrag import Engine

    path = cross_encoder_path()
    query = queries(1, seed=7)[0]
    passages = mixed_corpus(100, seed=11)
    engine = Engine(path)
    ce = CrossEncoder(str(path), device="cpu")
    pairs = [(query, p) for p in passages]
    tokens = sum(len(ids) for ids in engine.tokenizer([query] * 100, passages)["input_ids"])
    ours = np.array([o.outputs.score for o in engine.score(query, passages)])
    theirs = np.asarray(ce.predict(pairs, batch_size=32))  # both apply the model's sigmoid
    delta = float(np.abs(ours - theirs).max())
    times = interleaved(
        {"poolrag": lambda: engine.score(query, passages), "st": lambda: ce.predict(pairs, batch_size=32)},
        passes,
        warmup=0,  # the agreement run above warmed both up
    )
    return [
        ["score 1×100", "poolrag", 100, tokens, 100 / times["poolrag"], tokens / times["poolrag"],
         times["st"] / times["poolrag"], delta, ""],
        ["score 1×100", "sentence-transformers b32", 100, tokens, 100 / times["st"], tokens / times["st"],
         1.0, "", ""],
    ]  # fmt: skip


def token_embed_rows(n: int, passes: int) -> list[list[object]]:
    from sentence_transformers import SentenceTransformer

    from poolrag import Engine

    texts = mixed_corpus(n)
    path = minilm_path()
    engine = Engine(path)
    st = SentenceTransformer(str(path), device="cpu")
    tokens = sum(len(ids) for ids in engine.tokenizer(texts)["input_ids"])
    ours = engine.encode(texts, pooling_task="token_embed")
    theirs = st.encode(texts, batch_size=32, output_value="token_embeddings")
    # poolrag normalises token vectors by default (ColBERT-style); compare after normalising both
    delta = max(
        float(np.abs(o.outputs.data - t.numpy() / np.linalg.norm(t.numpy(), axis=-1, keepdims=True)).max())
        for o, t in zip(ours, theirs, strict=True)
    )
    times = interleaved(
        {
            "poolrag": lambda: engine.encode(texts, pooling_task="token_embed"),
            "st": lambda: st.encode(texts, batch_size=32, output_value="token_embeddings"),
        },
        passes,
        warmup=0,  # the agreement run above warmed both up
    )
    return [
        ["token_embed", "poolrag", n, tokens, n / times["poolrag"], tokens / times["poolrag"],
         times["st"] / times["poolrag"], delta, ""],
        ["token_embed", "sentence-transformers b32", n, tokens, n / times["st"], tokens / times["st"], 1.0,
         "", ""],
    ]  # fmt: skip


HEADERS = ["task", "engine", "texts", "tokens", "texts/s", "tokens/s", "× ST", "max |Δ|", "min cos"]
# field names of the --json rows, in HEADERS order
FIELDS = ["task", "engine", "texts", "tokens", "texts_per_s", "tokens_per_s", "ratio_vs_st", "max_abs_delta",
          "min_cosine"]  # fmt: skip


def as_records(rows: list[list[object]]) -> list[dict[str, object]]:
    """The printed rows as fields; blank cells (the baseline's agreement columns) become None."""
    records = []
    for row in rows:
        record = {field: (None if cell == "" else cell) for field, cell in zip(FIELDS, row, strict=True)}
        if record["min_cosine"] is not None:
            record["min_cosine"] = float(record["min_cosine"])
        records.append(record)
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="corpus size for embed and token_embed")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--fast-mode", default=None, help="cpu_fast_mode for the embed rows (bf16, int8)")
    parser.add_argument("--tasks", default="embed,score,token_embed")
    parser.add_argument("--json", type=Path, default=None, help="also write the machine and rows here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    facts = machine_facts()
    print(machine(facts))
    rows: list[list[object]] = []
    tasks = args.tasks.split(",")
    if "embed" in tasks:
        rows += embed_rows(args.n, args.passes, args.fast_mode)
    if "score" in tasks:
        rows += score_rows(args.passes)
    if "token_embed" in tasks:
        rows += token_embed_rows(args.n, args.passes)
    print(table(HEADERS, rows))
    if args.json is not None:
        report = {
            "machine": facts,
            "machine_line": machine(facts),
            # the output file by name only: the report may be shown, this machine's paths need not be
            "command": ["python", "benchmarks/throughput.py", *sys.argv[1:-1], args.json.name]
            if sys.argv[-1] == str(args.json)
            else ["python", "benchmarks/throughput.py", *sys.argv[1:]],
            "model": "all-MiniLM-L6-v2",
            "rows": as_records(rows),
        }
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
