"""Issue 27, item 2: the RSS of ``poolrag ingest`` does not grow with the corpus.

Every 64-chunk batch packs another number of token rows. Before the fix, torch's per-shape CPU
caches (ideep's prepared linear computations, oneDNN's primitives) and glibc's moving mmap
threshold kept memory per batch: with the 1-layer, 384-wide BERT below, ~200 KB per chunk
(754 MiB at ~100 chunks, 917 MiB at ~920 in benchmarks/RESULTS.md). The CLI now bounds both
caches and trims glibc's heap after every batch (:mod:`poolrag.native_heap`), so after start-up
the curve is flat.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

WORDS = [
    "honeybee",
    "forager",
    "colony",
    "queen",
    "waggle",
    "dance",
    "flower",
    "nectar",
    "tide",
    "moon",
    "gravity",
    "ocean",
]
OLD_GROWTH_PER_CHUNK_MB = 0.2  # measured before the fix with this model (see the module docstring)


def _prose(path: Path, megabytes: float) -> None:
    """Paragraphs of 3-8 sentences of 6-18 words: chunks of varied token counts, so batches too."""
    rng = random.Random(0)
    with path.open("w") as handle:
        written = 0
        while written < megabytes * 1_000_000:
            sentences = (
                " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18))).capitalize() + "."
                for _ in range(rng.randint(3, 8))
            )
            written += handle.write(" ".join(sentences) + "\n\n")


def _floor(samples: list[float]) -> float:
    """The low tenth of the RSS samples: the heap just after trims, past any early dip."""
    return sorted(samples)[len(samples) // 10]


def _rss_mb(pid: int) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    kib = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), None)
    return None if kib is None else kib / 1024


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc (Linux)")
def test_ingest_rss_stays_flat_while_chunks_stream_through(tmp_path: Path, tiny_model) -> None:
    model = tiny_model(
        "bert", hidden_size=384, num_hidden_layers=1, num_attention_heads=6, intermediate_size=1536
    )
    corpus = tmp_path / "prose.txt"
    _prose(corpus, 2.4)  # ~1,900 chunks of up to 256 tokens
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "POOLRAG_CACHE_DIR": str(tmp_path / "cache")}
    for name in ("LRU_CACHE_CAPACITY", "ONEDNN_PRIMITIVE_CACHE_CAPACITY", "MALLOC_MMAP_THRESHOLD_"):
        env.pop(name, None)  # the CLI's own defaults are under test
    command = [sys.executable, "-m", "poolrag.cli", "ingest", str(corpus), "--store", "qdrant"]
    command += ["--path", str(tmp_path / "q"), "--model", str(model), "--collection", "c"]
    command += ["--no-cache", "--quiet", "--json"]
    started = time.perf_counter()
    child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    samples: list[tuple[float, float]] = []
    while child.poll() is None and time.perf_counter() - started < 300:
        rss = _rss_mb(child.pid)
        if rss is not None:
            samples.append((time.perf_counter() - started, rss))
        time.sleep(0.1)
    stdout, stderr = child.communicate(timeout=60)
    elapsed = time.perf_counter() - started
    assert child.returncode == 0, stderr[-2000:]
    report = json.loads(stdout.strip().splitlines()[-1])
    # the report's seconds are the ingest proper; what came before is start-up and model load
    first_chunk = elapsed - report["seconds"]
    during = [(t - first_chunk, rss) for t, rss in samples if first_chunk <= t <= elapsed - 1.0]
    span = report["seconds"]
    assert report["chunks"] > 1200 and len(during) >= 12, (report, len(during))
    # A batch's activations (~100 MB with this model) are freed when it ends and given back at the
    # next trim, at most every 0.5 s, so RSS saw-tooths by about that much and a median lands
    # wherever the samples fell; what a per-batch leak raises is the floor between trims. The late
    # floor is the lowest late sample: on a loaded machine batches run long, fewer than a tenth of
    # the samples can fall just after a trim, and the low tenth then lands a batch's activations
    # above the floor (+101 MiB in one CI run). A leak lifts every late sample, the lowest too.
    first_third = _floor([rss for t, rss in during if t <= span / 3])
    last_third = min(rss for t, rss in during if t >= 2 * span / 3)
    chunks_between = report["chunks"] * 2 / 3
    old_growth = OLD_GROWTH_PER_CHUNK_MB * chunks_between
    assert last_third - first_third < 0.3 * old_growth, (
        f"RSS {first_third:.0f} -> {last_third:.0f} MiB over ~{chunks_between:.0f} chunks "
        f"(before the fix: +{old_growth:.0f} MiB)"
    )
