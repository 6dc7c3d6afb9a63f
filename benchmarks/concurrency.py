"""Concurrent single-text callers vs one big batch: does the engine core batch across callers?

    python benchmarks/concurrency.py [--n 1000] [--threads 32] [--passes 3]

N threads (and, separately, N asyncio tasks) each embed one text at a time from a shared list;
their total throughput is compared with one ``embed_array`` call on the whole list.
"""

from __future__ import annotations

import argparse
import asyncio
import threading

from common import interleaved, machine, minilm_path, table
from corpus import mixed_corpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    print(machine())
    from poolrag import Engine

    engine = Engine(minilm_path())
    texts = mixed_corpus(args.n, seed=21)

    def one_batch() -> None:
        engine.embed_array(texts)

    def threads() -> None:
        position = iter(range(len(texts)))
        lock = threading.Lock()

        def worker() -> None:
            while True:
                with lock:
                    i = next(position, None)
                if i is None:
                    return
                engine.embed_array([texts[i]])

        pool = [threading.Thread(target=worker) for _ in range(args.threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()

    def tasks() -> None:
        async def main() -> None:
            queue: asyncio.Queue[str] = asyncio.Queue()
            for text in texts:
                queue.put_nowait(text)

            async def worker() -> None:
                while not queue.empty():
                    await engine.aembed_array([queue.get_nowait()])

            await asyncio.gather(*(worker() for _ in range(args.threads)))

        asyncio.run(main())

    stats = engine.core_stats
    times = interleaved({"batch": one_batch, "threads": threads, "tasks": tasks}, args.passes)
    rows = [
        [label, args.n / times[key], times["batch"] / times[key]]
        for key, label in (
            ("batch", "one embed_array call"),
            ("threads", f"{args.threads} threads, one text per call"),
            ("tasks", f"{args.threads} asyncio tasks, one text per call"),
        )
    ]
    print(table(["callers", "texts/s", "share of one batch"], rows))
    print(f"engine core: {stats.batches} forward passes for {stats.sequences} sequences in all runs")


if __name__ == "__main__":
    main()
