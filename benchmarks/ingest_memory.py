#!/usr/bin/env python3
"""Memory of ``poolrag ingest`` on one large text file or a folder of many: peak and RSS curve.

    python benchmarks/ingest_memory.py [--mb 50] [--files 1] [--model FOLDER] [--cache] [--every 5]
                                       [--store milvus|milvus-server|qdrant|qdrant-edge]

Writes ``--mb`` MB of prose (paragraphs of varied sentences) into a temp folder, as one file or
as ``--files`` files of equal size, and runs ``poolrag ingest`` on it in a subprocess. Every
``--every`` seconds it samples the child's RSS (``/proc/PID/status``) and the chunks stored so far
are estimated from the time (the report gives the total), so the curve shows whether memory grows
with the corpus: flat after the start is what streaming promises. At the end it prints the peak,
from ``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss``.
Chunking, not the model, is what scales with the file, so by default the model is a tiny random
BERT (1 layer, 32 dims) with MiniLM's tokenizer: the tokenizer and chunk sizes are the real ones,
and embedding 50 MB takes minutes instead of hours. ``--model`` measures another model.
"""

from __future__ import annotations

import argparse
import json
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


def documents_done(checkpoints: Path) -> int:
    """Documents the run has checkpointed so far (0 for one file until it ends)."""
    for path in checkpoints.glob("*.json"):
        try:
            return len(json.loads(path.read_text()).get("done", {}))
        except (OSError, ValueError):  # replaced while read
            return -1
    return 0


def rss_mib(pid: int) -> float | None:
    """Resident memory of process ``pid`` in MiB, None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS")), 0) / 1024


def sample_rss(
    child: subprocess.Popen, every: float, checkpoints: Path, server: subprocess.Popen | None = None
) -> list[tuple[float, float, float]]:
    """(seconds, ingest RSS MiB, server RSS MiB) every ``every`` seconds until ``child`` exits; each
    sample is also printed as taken, with the documents checkpointed by then, so a run cut short
    still has its curve. The server column is 0 when the store runs inside the ingest."""
    started = time.perf_counter()
    curve = []
    print("live:    s   RSS MiB   server MiB   documents done", flush=True)
    while child.poll() is None:
        ingest = rss_mib(child.pid)
        if ingest is None:
            break
        beside = (rss_mib(server.pid) or 0.0) if server is not None else 0.0
        seconds = time.perf_counter() - started
        curve.append((seconds, ingest, beside))
        print(
            f"live: {seconds:4.0f}  {ingest:8.0f}  {beside:11.0f}  {documents_done(checkpoints):8d}",
            flush=True,
        )
        time.sleep(every)
    return curve


def start_milvus_server(data_dir: Path) -> tuple[subprocess.Popen, str]:
    """Milvus Lite's gRPC server on a free 127.0.0.1 port, and its URI once it accepts connections."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "milvus_lite", "server", "--data-dir", str(data_dir)]
    server = subprocess.Popen(
        [*command, "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and server.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return server, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    server.kill()
    raise SystemExit("milvus_lite server did not start")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=50.0, help="size of the text file (default 50)")
    parser.add_argument(
        "--store", choices=("milvus", "milvus-server", "qdrant", "qdrant-edge"), default="milvus"
    )
    parser.add_argument("--model", help="model folder (default: a tiny random BERT, see above)")
    parser.add_argument("--cache", action="store_true", help="use an embedding cache (default --no-cache)")
    parser.add_argument("--files", type=int, default=1, help="split the corpus into this many files")
    parser.add_argument("--every", type=float, default=5.0, help="seconds between RSS samples")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="poolrag-mem-") as tmp:
        root = Path(tmp)
        corpus = root / "corpus"
        corpus.mkdir()
        size = sum(
            write_text(corpus / f"doc{n:05d}.txt", args.mb / args.files, seed=n) for n in range(args.files)
        )
        target = corpus / "doc00000.txt" if args.files == 1 else corpus
        model = args.model or str(tiny_model(root / "tiny"))
        server = None
        if args.store == "milvus-server":
            server, uri = start_milvus_server(root / "milvus-server")
            location = ["--uri", uri]
        else:
            location = (
                ["--uri", str(root / "m.db")] if args.store == "milvus" else ["--path", str(root / "q")]
            )
        store = "milvus" if args.store == "milvus-server" else args.store
        command = [
            sys.executable,
            "-m",
            "poolrag.cli",
            "ingest",
            str(target),
            "--store",
            store,
            *location,
            "--model",
            model,
            "--collection",
            "big",
            "--quiet",
            "--json",
            "--checkpoint",
            str(root / "checkpoints" / "run.json"),
        ]
        command += ["--cache", str(root / "c.sqlite")] if args.cache else ["--no-cache"]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "POOLRAG_CACHE_DIR": str(root / "cache")}
        started = time.perf_counter()
        with (root / "stderr.log").open("w+") as errors:  # a file: a long run's warnings never fill a pipe
            child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=errors, text=True)
            curve = sample_rss(child, args.every, root / "checkpoints", server)
            stdout, _ = child.communicate()
            errors.seek(0)
            stderr = errors.read()
        elapsed = time.perf_counter() - started
        if server is not None:
            server.terminate()
            server.wait(timeout=60)
        peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux, any child
        if child.returncode != 0:
            print(stderr[-3000:], file=sys.stderr)
            return child.returncode
        report = json.loads(stdout.strip().splitlines()[-1])
        print(json.dumps(report))
        rate = report["chunks"] / max(report["seconds"], 1e-9)
        loading = elapsed - report["seconds"]  # start-up and model load, before the first chunk
        print("   s   RSS MiB   server MiB   ~chunks")
        for seconds, ingest, beside in curve:
            chunks = min(report["chunks"], max(0, int((seconds - loading) * rate)))
            print(f"{seconds:4.0f}  {ingest:8.0f}  {beside:11.0f}  {chunks:8d}")
        print(
            f"{args.files} file(s), {size / 1e6:.1f} MB, store {args.store}, "
            f"{'cache' if args.cache else 'no cache'}: {report['chunks']} chunks, "
            f"peak RSS {peak_kib / 1024:.0f} MiB (largest child), "
            f"ingest peak {max(c[1] for c in curve):.0f} MiB, "
            f"server peak {max(c[2] for c in curve):.0f} MiB, {elapsed:.0f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
