#!/usr/bin/env python3
"""Peak memory of ``poolrag ingest`` on one large text file.

    python benchmarks/ingest_memory.py [--mb 50] [--store milvus|qdrant] [--model FOLDER] [--cache]

Writes a ``--mb`` MB text file (paragraphs of varied sentences) into a temp folder and runs
``poolrag ingest`` on it in a subprocess, then prints the child's peak RSS, read from
``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`` (the largest process that ran under this one).
Chunking, not the model, is what scales with the file, so by default the model is a tiny random
BERT (1 layer, 32 dims) with MiniLM's tokenizer: the tokenizer and chunk sizes are the real ones,
and embedding 50 MB takes a minute instead of hours. ``--model`` measures another model.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = [
    "honeybee",
    "forager",
    "colony",
    "queen",
    "waggle",
    "dance",
    "sun",
    "angle",
    "distance",
    "flower",
    "nectar",
    "pollen",
    "swarm",
    "spring",
    "tide",
    "moon",
    "gravity",
    "ocean",
    "bulge",
    "neap",
    "quarter",
    "sourdough",
    "starter",
    "yeast",
    "bacteria",
    "dough",
    "oven",
    "crust",
    "steam",
    "ownership",
    "borrow",
    "checker",
    "reference",
    "compile",
    "memory",
    "chess",
    "opening",
    "centre",
    "knight",
    "bishop",
    "castle",
    "gambit",
]


def write_text(path: Path, megabytes: float, seed: int = 0) -> int:
    """A file of ``megabytes`` MB: paragraphs of 3-8 sentences of 6-18 words."""
    rng = random.Random(seed)
    target = int(megabytes * 1_000_000)
    written = 0
    with path.open("w", encoding="utf-8") as handle:
        while written < target:
            sentences = (
                " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18))).capitalize() + "."
                for _ in range(rng.randint(3, 8))
            )
            paragraph = " ".join(sentences) + "\n\n"
            handle.write(paragraph)
            written += len(paragraph)
    return written


def tiny_model(dest: Path) -> Path:
    """A 1-layer, 32-dim random BERT with the packaged MiniLM tokenizer."""
    import shutil

    import transformers

    from poolrag.ingest import default_model

    tokenizer_src = Path(default_model())
    config = transformers.BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=512,
        pad_token_id=0,
    )
    transformers.BertModel(config).eval().save_pretrained(dest)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        if (tokenizer_src / name).exists():
            shutil.copy(tokenizer_src / name, dest / name)
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=50.0, help="size of the text file (default 50)")
    parser.add_argument("--store", choices=("milvus", "qdrant"), default="milvus")
    parser.add_argument("--model", help="model folder (default: a tiny random BERT, see above)")
    parser.add_argument("--cache", action="store_true", help="use an embedding cache (default --no-cache)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="poolrag-mem-") as tmp:
        root = Path(tmp)
        size = write_text(root / "big.txt", args.mb)
        model = args.model or str(tiny_model(root / "tiny"))
        location = ["--uri", str(root / "m.db")] if args.store == "milvus" else ["--path", str(root / "q")]
        command = [
            sys.executable,
            "-m",
            "poolrag.cli",
            "ingest",
            str(root / "big.txt"),
            "--store",
            args.store,
            *location,
            "--model",
            model,
            "--collection",
            "big",
            "--quiet",
            "--json",
        ]
        command += ["--cache", str(root / "c.sqlite")] if args.cache else ["--no-cache"]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "POOLRAG_CACHE_DIR": str(root / "cache")}
        started = time.perf_counter()
        result = subprocess.run(command, env=env, capture_output=True, text=True)
        elapsed = time.perf_counter() - started
        peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
        if result.returncode != 0:
            print(result.stderr[-3000:], file=sys.stderr)
            return result.returncode
        print(result.stdout.strip().splitlines()[-1])
        print(
            f"file {size / 1e6:.1f} MB, store {args.store}, "
            f"{'cache' if args.cache else 'no cache'}: peak RSS {peak_kib / 1024:.0f} MiB, {elapsed:.0f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
