"""The JSON of answers that carry vectors, written by orjson straight from the numpy rows.

Building a pydantic answer validated every float of every vector and then wrote each one again;
for a ``/v1/embeddings`` answer that was most of the time the server spent on it once the forward
was cheap (``benchmarks/answer_encoding.py``). orjson writes the rows directly. They are written as
float64, each value the shortest decimal that reads back as the same float64, so a client's JSON
parser gets exactly ``float(np.float32(value))``, as from the pydantic answer (the same bytes, in
fact, from orjson 3.11.7 and pydantic 2.13 on; older ones write ``3.4e38`` for ``3.4e+38``, the same
float). orjson comes with the ``server`` extra; without it pydantic's serialiser writes the same
bytes without validating them, about 2.5 times slower.

orjson writes a float32 array as float32's own shortest decimals (``0.1``, which a client reads as
the float64 0.1, not as 0.10000000149011612), so each row is widened to float64 as it is written
(:class:`FloatRows`), never the whole answer at once: a per-token answer (500 x 256 x 384 values)
peaked 1.39 GB with every row widened first, 1.0 GB (its JSON) this way.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pydantic_core

try:
    import orjson
except ImportError:  # pragma: no cover - orjson is part of the server extra
    orjson = None


class FloatRows:
    """A vector or matrix of floats (float32, float16, or bfloat16 widened to float32), written as
    float64 values when its answer is encoded (a vector's, or a per-token matrix's, float-list answer)."""

    __slots__ = ("values",)

    def __init__(self, values: np.ndarray) -> None:
        self.values = values

    def __len__(self) -> int:
        return len(self.values)

    def widened(self) -> np.ndarray:
        """The values as a contiguous float64 array (exact for float32, float16 and bfloat16)."""
        return np.ascontiguousarray(self.values, dtype=np.float64)


def _widened(value: object) -> object:
    if isinstance(value, FloatRows):
        return value.widened()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _as_list(value: object) -> object:
    if isinstance(value, FloatRows):
        return value.widened().tolist()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


class JsonAnswer:
    """An answer already in JSON's types (an object, or a bare list as TEI's ``/embed``), with
    :class:`FloatRows` for vectors; the route encodes it off the event loop (:meth:`encode`)."""

    __slots__ = ("content", "values")

    def __init__(self, content: dict[str, Any] | list[Any], values: int) -> None:
        self.content = content
        self.values = values  # how many vector values it holds: small answers are encoded on the loop

    def encode(self) -> bytes:
        if orjson is not None:
            return orjson.dumps(self.content, default=_widened, option=orjson.OPT_SERIALIZE_NUMPY)
        return pydantic_core.to_json(self.content, fallback=_as_list)
