"""What one request's work costs the server's event loop, against what handing it to a thread costs.

    python benchmarks/loop_costs.py [--repeats 300]

The numbers behind :mod:`poolrag.loop_work`'s one rule (work estimated under a thread hop stays on
the loop): the median µs of a hop (``asyncio.to_thread`` of nothing, as the engine and the server
hand work over), of parsing and validating an OpenAI ``/v1/embeddings`` body (per byte), of
tokenising its texts as the engine does (per character and per input) and of encoding a float-list
answer (per value), all-MiniLM-L6-v2's tokenizer, the mixed corpus's texts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Callable

import numpy as np
from common import machine, minilm_path, table, timed
from corpus import mixed_corpus


def median_us(work: Callable[[], object], repeats: int) -> float:
    return timed(work, passes=repeats, warmup=10)[0] * 1e6


def hop_us(repeats: int) -> float:
    async def main() -> float:
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            await asyncio.to_thread(int)
            times.append(time.perf_counter() - started)
        return statistics.median(times) * 1e6

    return asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=300)
    args = parser.parse_args()
    from poolrag import Engine
    from poolrag.request import ResolvedParams
    from poolrag.server.float_json import JsonAnswer
    from poolrag.server.parsing import parse_body
    from poolrag.server.schemas import EmbeddingRequest
    from poolrag.server.settings import Limits, ServerSettings
    from poolrag.testing import engine_internals

    engine = Engine(minilm_path(), tune="off")
    processor = engine_internals.processor(engine)
    params = ResolvedParams(task="embed")
    limits = Limits.resolve(ServerSettings(served_model_names=("m",)), engine.max_model_len)
    texts = mixed_corpus(2000, seed=0)
    rows = []
    per_unit: dict[str, list[float]] = {"byte": [], "char": [], "value": []}
    for count in (1, 16, 64):
        chunk = texts[:count]
        raw = json.dumps({"model": "m", "input": chunk}).encode()
        chars = sum(len(t) for t in chunk)
        parse = median_us(lambda raw=raw: parse_body(raw, EmbeddingRequest, limits), args.repeats)
        tokenise = median_us(lambda c=chunk: processor.texts(c, params, -1, None), args.repeats)
        answer = JsonAnswer({"data": [{"embedding": np.random.rand(384)} for _ in chunk]}, 384 * count)
        encode = median_us(answer.encode, args.repeats)
        per_unit["byte"].append(parse / len(raw))
        per_unit["char"].append(tokenise / chars)
        per_unit["value"].append(encode / (384 * count))
        rows.append([count, len(raw), f"{parse:.1f}", chars, f"{tokenise:.1f}", 384 * count, f"{encode:.1f}"])
    hop = hop_us(args.repeats)
    print(f"{machine()}; one thread hop (asyncio.to_thread): {hop:.1f} µs")
    headers = ["texts", "body bytes", "parse µs", "chars", "tokenise µs", "answer values", "encode µs"]
    print(table(headers, rows))
    for unit, costs in per_unit.items():
        cost = min(costs)
        print(f"per {unit}: {cost * 1e3:.2f} ns (min over sizes); a hop's worth: {hop / cost:,.0f} {unit}s")


if __name__ == "__main__":
    main()
