"""Which records every store holds as given: the one rule the readers and the ingest driver apply.

A record's fields reach a store as its source (the path, plus a JSONL record's ``id``), its text and
its metadata keys and values. Probed on Milvus Lite (rows with a JSON dynamic field), Qdrant local
(pickled payloads) and qdrant-edge (Rust payload values), a record is refused when it holds:

* a string with a lone surrogate (JSON's ``"\\udc80"``, or an undecodable byte in a file name), as
  a key, a value, the id or the text: Milvus refuses the whole batch and qdrant-edge the point;
* a float that is NaN or infinite (``json.loads`` takes ``NaN`` and ``Infinity``): Milvus stores
  ``null``, qdrant-edge refuses it;
* an integer outside ``-2**63 .. 2**64 - 1``: Milvus refuses it, qdrant-edge stores a rounded float;
* a key that is not a string, or a value that is not JSON (``None``, bool, int, float, str, and
  lists, tuples and string-keyed dicts of those).

Empty keys, keys named like a store's own columns (``id``, ``vector``, ``$meta``: Milvus renames
them on the way in and back, :mod:`poolrag.stores.milvus_payload`) and NUL characters are stored
as given everywhere, so they are kept. A bad record is left out alone, named by its place and field,
and the rest of the run is stored: the same records on every store.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from poolrag.text_validity import lone_surrogate

INT_RANGE = (-(2**63), 2**64 - 1)  # Milvus's int64 and uint64 together; qdrant-edge's as well


@dataclass(frozen=True)
class NotARecord:
    """A line or row of a record file (JSONL, CSV) that holds no record, and why: left out alone."""

    reason: str


def string_problem(text: Any, name: str) -> str | None:
    """Why the string field ``name`` cannot be stored, or ``None``."""
    if not isinstance(text, str):  # a hand-made Document's None or Path
        return f"{name} is of type {type(text).__name__}, not a string"
    position = lone_surrogate(text)
    if position is None:
        return None
    return f"{name} is not valid Unicode (lone surrogate at character {position})"


def value_problem(value: Any, name: str) -> str | None:
    """Why the value ``name`` cannot be stored as given, or ``None``; lists and dicts are searched."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        if not INT_RANGE[0] <= value <= INT_RANGE[1]:
            return f"{name} is an integer outside the 64-bit range the stores hold (-2**63 to 2**64-1)"
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{name} is not a finite number ({value})"
    if isinstance(value, str):
        return string_problem(value, name)
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            if (problem := value_problem(item, f"{name}[{i}]")) is not None:
                return problem
        return None
    if isinstance(value, Mapping):
        return _mapping_problem(value, name)
    return f"{name} is of type {type(value).__name__}, not a JSON value"


def metadata_problem(metadata: Mapping[Any, Any]) -> str | None:
    """Why a record's metadata (its payload fields besides text and source) cannot be stored, or
    ``None``: the first bad key or value, named."""
    if not isinstance(metadata, Mapping):
        return f"metadata is of type {type(metadata).__name__}, not a mapping"
    return _mapping_problem(metadata, "")


def _mapping_problem(mapping: Mapping[Any, Any], prefix: str) -> str | None:
    for key, value in mapping.items():
        named = f"{prefix}[{key!r}]" if prefix else repr(key)  # repr escapes a lone surrogate
        if not isinstance(key, str):
            return f"a field name ({named}) is of type {type(key).__name__}, not a string"
        if (problem := string_problem(key, f"a field name ({named})")) is not None:
            return problem
        if (problem := value_problem(value, named)) is not None:
            return problem
    return None
