"""What encoding one ``/v1/embeddings`` float-list answer costs the server, by encoder.

    python benchmarks/answer_encoding.py [--repeats 200]

The vectors are float32 (what the engine returns); every encoder writes each value as the
shortest decimal that reads back as the same float64, so ``json.loads`` of any of them gives exactly
``float(np.float32 value)``, as the answers always did (checked here). Encoders:

- pydantic (before): ``.tolist()`` of each row, ``EmbeddingResponse(...)`` (validates the float
  lists) and ``model_dump_json``, the server's path before the answer had its own encoder;
- json: ``json.dumps`` of the same dict of float lists (the standard library);
- pydantic_core: ``pydantic_core.to_json`` of the same dict (no validation; the server's fallback
  when orjson is missing);
- orjson lists: ``orjson.dumps`` of the dict of float lists;
- server (after): :func:`poolrag.server.routes.embeddings.embedding_answer` as the route calls it (orjson
  with numpy rows as float64).

Median microseconds of ``--repeats`` encodings after a warm-up (the encoders in turn), for 1, 16 and
256 vectors of 384 floats (MiniLM's width).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import numpy as np
from common import interleaved, machine, table


def _interleaved_us(encoders: dict[str, Callable[[], bytes]], repeats: int) -> dict[str, float]:
    """Median microseconds of each encoder, the encoders taken in turn so load drifts hit all."""
    return {name: seconds * 1e6 for name, seconds in interleaved(encoders, passes=repeats, warmup=5).items()}


def main() -> int:
    import orjson
    import pydantic_core

    from poolrag.server.routes.embeddings import embedding_answer
    from poolrag.server.schemas import EmbeddingData, EmbeddingResponse, Usage

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {machine()}")
    rng = np.random.default_rng(0)
    rows = []
    for count in (1, 16, 256):
        vectors = rng.standard_normal((count, 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        usage = Usage(prompt_tokens=count * 20, total_tokens=count * 20)
        head = {"id": "embd-1", "object": "list", "created": 1, "model": "m"}

        def as_dict(vectors: np.ndarray = vectors, usage: Usage = usage, head: dict = head) -> dict:
            data = [
                {"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)
            ]
            return {**head, "data": data, "usage": usage.model_dump()}

        def pydantic_path(vectors: np.ndarray = vectors, usage: Usage = usage) -> bytes:
            data = [EmbeddingData(index=i, embedding=v.tolist()) for i, v in enumerate(vectors)]
            answer = EmbeddingResponse(id="embd-1", created=1, model="m", data=data, usage=usage)
            return answer.model_dump_json(exclude_none=True).encode()

        def server_path(vectors: np.ndarray = vectors, usage: Usage = usage) -> bytes:
            return embedding_answer("embd-1", 1, "m", list(vectors), usage).encode()

        encoders: dict[str, Callable[[], bytes]] = {
            "pydantic (before)": pydantic_path,
            "json.dumps": lambda: json.dumps(as_dict(), separators=(",", ":")).encode(),
            "pydantic_core.to_json": lambda: pydantic_core.to_json(as_dict()),
            "orjson, float lists": lambda: orjson.dumps(as_dict()),
            "server (after: orjson, numpy rows)": server_path,
        }
        expected = vectors.astype(np.float64)
        for name, fn in encoders.items():
            loaded = json.loads(fn())
            got = np.array([item["embedding"] for item in loaded["data"]])
            assert np.array_equal(got, expected), f"{name}: the floats read back differ"
        assert server_path() == pydantic_path(), "the server's answer is not the pydantic answer's bytes"
        medians = _interleaved_us(encoders, args.repeats)
        base = medians["pydantic (before)"]
        for name, fn in encoders.items():
            rows.append([f"{count} × 384", name, medians[name], base / medians[name], len(fn())])
    print(table(["answer", "encoder", "µs (median)", "speed-up vs pydantic", "bytes"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
