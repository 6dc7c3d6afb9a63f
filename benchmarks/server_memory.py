"""Server memory and event-loop responsiveness under hostile 16 MB requests (issues 13, 27 and 47).

Starts ``poolrag serve`` (all-MiniLM-L6-v2) in a subprocess on 127.0.0.1 and sends, one phase
after the other, bodies near the server's 16 MiB limit, all with ``truncate_prompt_tokens: -1``:

* ``text``: one text of 3,145,728 words (``"word " * 3145728``, 15.7 MB), then ``--concurrent``
  of them at once;
* ``rerank``: a ``/rerank`` of 2,048 documents of 1,600 words (16.4 MB);
* ``ids``: one list of ``--ids`` token ids;
* ``tokenize``: a ``/tokenize`` of the same 15.7 MB text (``prompt``; the route keeps every token,
  so it has no ``truncate_prompt_tokens``), one request, then ``--concurrent`` at once;
* ``idle``: a burst of ``--burst`` varied requests, four at a time (``/v1/embeddings`` batches of 1
  to 64 texts of 3 to 150,000 words, ``/tokenize`` prompts, ``/rerank``; every tenth body near
  the 16 MiB limit), then the RSS 60 s after it and ``--idle-later-s`` after it (issue 47 item 5).

Meanwhile it samples the server's resident memory (VmRSS, every 20 ms) and probes ``GET /health``
every 100 ms. Prints, per phase: the peak RSS, the RSS before and after, the slowest ``/health``
answer and the status codes. Then it waits ``--idle-s`` seconds and prints the idle RSS against
the post-load idle RSS (after start-up and one small request). ``--rss-cap-gb`` kills the server
if it grows past the cap, so a run on an unbounded server cannot take the machine down.

    python benchmarks/server_memory.py [--concurrent 3] [--ids 8000000] [--idle-s 60] [--rss-cap-gb 8]
                                       [--phases text rerank ids tokenize idle] [--burst 200]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from common import machine, minilm_path, poolrag_server

PHASES = ("text", "rerank", "ids", "tokenize", "idle")
_WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "alpha", "beta", "gamma")


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class Sampler(threading.Thread):
    """Samples the server's RSS and ``/health`` latency until stopped; kills it past the cap."""

    def __init__(self, process: subprocess.Popen[bytes], url: str, cap_kib: int) -> None:
        super().__init__(daemon=True)
        self.process, self.url, self.cap_kib = process, url, cap_kib
        self.peak_kib = 0
        self.health_max_s = 0.0
        self.health_failures = 0
        self.killed = False
        self._done = threading.Event()

    def run(self) -> None:
        threading.Thread(target=self._probe, daemon=True).start()
        while not self._done.is_set():
            rss = _rss_kib(self.process.pid)
            self.peak_kib = max(self.peak_kib, rss)
            if rss > self.cap_kib and not self.killed:
                self.killed = True
                self.process.kill()
            time.sleep(0.02)

    def _probe(self) -> None:
        with httpx.Client(timeout=60) as client:
            while not self._done.is_set():
                started = time.perf_counter()
                try:
                    ok = client.get(f"{self.url}/health").status_code == 200
                except httpx.HTTPError:
                    ok = False
                self.health_max_s = max(self.health_max_s, time.perf_counter() - started)
                self.health_failures += not ok
                time.sleep(0.1)

    def stop(self) -> None:
        self._done.set()
        self.join()


def _hostile(url: str, path: str, body: bytes) -> str:
    try:
        response = httpx.post(
            f"{url}{path}", content=body, headers={"content-type": "application/json"}, timeout=900
        )
        return str(response.status_code)
    except httpx.HTTPError as exc:
        return type(exc).__name__


def _phase(
    process: subprocess.Popen[bytes], url: str, path: str, body: bytes, clients: int, cap_kib: int
) -> dict:
    before = _rss_kib(process.pid)
    sampler = Sampler(process, url, cap_kib)
    sampler.start()
    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        statuses = Counter(pool.map(lambda _: _hostile(url, path, body), range(clients)))
    elapsed = time.perf_counter() - started
    time.sleep(1.0)  # let the last samples and probes in
    sampler.stop()
    return {
        "clients": clients,
        "rss_before_mb": before / 1024,
        "peak_rss_mb": sampler.peak_kib / 1024,
        "rss_after_mb": _rss_kib(process.pid) / 1024,
        "killed_at_cap": sampler.killed,
        "health_max_s": sampler.health_max_s,
        "health_failures": sampler.health_failures,
        "statuses": dict(statuses),
        "wall_s": elapsed,
    }


def _varied_request(index: int) -> tuple[str, bytes]:
    """One request of the idle phase's burst: its route and body (seeded by ``index``)."""
    rng = random.Random(index)
    words = rng.choice([3, 30, 300, 3_000, 30_000, 150_000])
    if index % 10 == 9:
        words = 3_000_000  # near the 16 MiB limit
    text = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, words)))
    kind = index % 4
    if kind == 1 and words < 3_000_000:
        return "/tokenize", json.dumps({"prompt": text}).encode()
    if kind == 2:
        documents = [text[: rng.randint(10, 4_000)] for _ in range(rng.randint(1, 64))]
        body = {"query": "a fox", "documents": documents, "truncate_prompt_tokens": -1}
        return "/rerank", json.dumps(body).encode()
    inputs = [text[: rng.randint(10, 4_000)] for _ in range(rng.randint(0, 63))] + [text]
    return "/v1/embeddings", json.dumps({"input": inputs, "truncate_prompt_tokens": -1}).encode()


def _idle_after_burst(
    process: subprocess.Popen[bytes], url: str, burst: int, later_s: float, loaded_kib: int
) -> None:
    """Sends the burst, then prints the RSS right after it, 60 s after it and ``later_s`` after it."""
    requests = [_varied_request(index) for index in range(burst)]
    started = time.perf_counter()
    with ThreadPoolExecutor(4) as pool:
        statuses = Counter(pool.map(lambda request: _hostile(url, *request), requests))
    elapsed = time.perf_counter() - started
    ended = time.monotonic()
    right_after = _rss_kib(process.pid)
    points = [("right after", right_after)]
    for wait in (60.0, later_s):
        time.sleep(max(0.0, ended + wait - time.monotonic()))
        points.append((f"{wait:g} s after", _rss_kib(process.pid)))
    print(f"burst of {burst} varied requests in {elapsed:.0f} s, statuses {dict(statuses)}")
    for label, kib in points:
        print(f"idle RSS {label} the burst: {kib / 1024:.0f} MB, {kib / loaded_kib:.2f}x the post-load idle")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", type=int, default=8_000_000, help="token ids per request (2 bytes each)")
    parser.add_argument("--concurrent", type=int, default=3)
    parser.add_argument("--idle-s", type=float, default=60.0, help="wait before the idle RSS")
    parser.add_argument("--rss-cap-gb", type=float, default=8.0)
    parser.add_argument("--burst", type=int, default=200, help="requests in the idle phase's burst")
    parser.add_argument("--idle-later-s", type=float, default=180.0, help="the idle phase's later point")
    parser.add_argument(
        "--phases", nargs="+", choices=PHASES, default=list(PHASES), help="which phases to run, in order"
    )
    args = parser.parse_args()

    def body(value: dict) -> bytes:
        return json.dumps({**value, "truncate_prompt_tokens": -1}, separators=(",", ":")).encode()

    text = body({"input": "word " * 3_145_728})
    rerank = body({"query": "a word", "documents": ["word " * 1_600] * 2_048})
    ids = body({"input": [1] * args.ids})
    prompt = json.dumps({"prompt": "word " * 3_145_728}, separators=(",", ":")).encode()
    every = [
        ("text", "/v1/embeddings", text, 1),
        ("text", "/v1/embeddings", text, args.concurrent),
        ("rerank", "/rerank", rerank, 1),
        ("ids", "/v1/embeddings", ids, 1),
        ("tokenize", "/tokenize", prompt, 1),
        ("tokenize", "/tokenize", prompt, args.concurrent),
    ]
    phases = [phase for phase in every if phase[0] in args.phases]
    with poolrag_server(str(minilm_path()), quiet=False, start_s=180) as (process, url):
        print(machine())
        httpx.post(f"{url}/v1/embeddings", json={"input": "warm up"}, timeout=60)
        while 'state="measuring"' in httpx.get(f"{url}/metrics", timeout=60).text:
            time.sleep(1.0)  # a first load times its paths in the background: idle is after that
        time.sleep(2.0)
        loaded_kib = _rss_kib(process.pid)
        print(f"post-load idle server RSS: {loaded_kib / 1024:.0f} MB")
        cap_kib = int(args.rss_cap_gb * 1024 * 1024)
        for name, path, payload, clients in phases:
            label = f"{name} ({len(payload) / 1e6:.1f} MB) x {clients} concurrent"
            if process.poll() is not None:
                print(f"{label}: not run, the server is gone")
                continue
            result = _phase(process, url, path, payload, clients, cap_kib)
            peak = f"{result['peak_rss_mb']:.0f} MB"
            if result["killed_at_cap"]:
                peak = f"> {args.rss_cap_gb:g} GB (killed at the cap)"
            print(
                f"{label}: peak RSS {peak} (from {result['rss_before_mb']:.0f} MB, "
                f"{result['rss_after_mb']:.0f} MB after); slowest /health {result['health_max_s']:.3f} s, "
                f"{result['health_failures']} failed; statuses {result['statuses']}; {result['wall_s']:.1f} s"
            )
        if "idle" in args.phases and process.poll() is None:
            _idle_after_burst(process, url, args.burst, args.idle_later_s, loaded_kib)
        elif process.poll() is None:
            time.sleep(args.idle_s)
            idle_kib = _rss_kib(process.pid)
            print(
                f"idle RSS {args.idle_s:g} s after the burst: {idle_kib / 1024:.0f} MB, "
                f"{idle_kib / loaded_kib:.2f}x the post-load idle"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
