"""Cold start: import + load + first vector, each in a fresh subprocess (median of runs).

    python benchmarks/cold_start.py [--runs 3]

"in-process" is measured inside the child from before the first import; "process" adds the
interpreter's own start-up, as a user running a script would see it. ``poolrag compile=background``
is the same engine compiling in the background with its artifacts already on disk (one untimed
run first puts them there): its first vector is eager, and "compiled active s" is when the
compiled forward took over, counted from the engine's construction.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from common import machine, minilm_path, table

CHILD = {
    "poolrag": (
        "import time; t0 = time.perf_counter()\n"
        "from poolrag import Engine\n"
        "t1 = time.perf_counter(); e = Engine({path!r})\n"
        "t2 = time.perf_counter(); e.embed_array(['hello world'])\n"
        "t3 = time.perf_counter(); print(t1 - t0, t2 - t1, t3 - t2)\n"
    ),
    "poolrag compile=background": (
        "import time; t0 = time.perf_counter()\n"
        "from poolrag import Engine\n"
        "t1 = time.perf_counter(); e = Engine({path!r}, compile='background')\n"
        "t2 = time.perf_counter(); e.embed_array(['hello world'])\n"
        "t3 = time.perf_counter(); r = e.wait_for_compile()\n"
        "print('compiled', r.state, r.source.replace(' ', '-'), time.perf_counter() - t1)\n"
        "print(t1 - t0, t2 - t1, t3 - t2)\n"
    ),
    "sentence-transformers": (
        "import time; t0 = time.perf_counter()\n"
        "from sentence_transformers import SentenceTransformer\n"
        "t1 = time.perf_counter(); m = SentenceTransformer({path!r}, device='cpu')\n"
        "t2 = time.perf_counter(); m.encode(['hello world'])\n"
        "t3 = time.perf_counter(); print(t1 - t0, t2 - t1, t3 - t2)\n"
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(machine())
    path = str(minilm_path())
    env = {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    import os

    env = dict(os.environ, **env)
    rows = []
    for name, code in CHILD.items():
        parts: list[tuple[float, float, float, float]] = []
        compiled: list[float] = []
        for run in range(args.runs + (1 if "compile" in name else 0)):
            start = time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-c", code.format(path=path)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            total = time.perf_counter() - start
            for line in out.stdout.splitlines():
                if line.startswith("compiled "):
                    print(f"{name} run {run}: {line}", flush=True)
                    if "compile" in name and run > 0:
                        compiled.append(float(line.split()[-1]))
            if "compile" in name and run == 0:
                continue  # the untimed run that leaves the artifacts on disk
            imp, load, first = (float(x) for x in out.stdout.split()[-3:])
            parts.append((imp, load, first, total))
        med = [statistics.median(p[i] for p in parts) for i in range(4)]
        ready = statistics.median(compiled) if compiled else ""
        rows.append([name, med[0], med[1], med[2], med[0] + med[1] + med[2], med[3], ready])
    headers = [
        "engine",
        "import s",
        "load s",
        "first vector s",
        "in-process s",
        "process s",
        "compiled active s",
    ]
    print(table(headers, rows))


if __name__ == "__main__":
    main()
