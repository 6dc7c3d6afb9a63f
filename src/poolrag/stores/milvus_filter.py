"""Metadata filters and id lists as Milvus boolean expressions, quoted so no value can change them.

Milvus takes filters as expression text (Milvus Lite has no parameterised templates), so every
value passes through :func:`literal`: strings are double-quoted with ``\\`` and ``"`` escaped and
control characters refused, numbers and booleans are written by Python. Keys are identifiers
(checked in :mod:`poolrag.stores.filters`) and are read as ``$meta["key"]``, which cannot collide
with a column or an operator; keys that ``milvus_payload`` moved aside are read where it put them.
"""

from __future__ import annotations

from collections.abc import Sequence

from poolrag.errors import InvalidInputError
from poolrag.stores.filters import CONTROL_CHARACTERS, CheckedFilter, Scalar
from poolrag.stores.milvus_payload import COLUMNS, RENAMED_KEY, source_column


def string_literal(text: str) -> str:
    """``text`` as a Milvus string literal."""
    if CONTROL_CHARACTERS.search(text):
        raise InvalidInputError(f"{text!r} contains a control character, which a Milvus filter cannot hold")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def literal(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return string_literal(value)


def in_list(field: str, values: Sequence[str]) -> str:
    """``field in ["a", "b"]`` for a schema column."""
    return f"{field} in [{', '.join(string_literal(v) for v in values)}]"


def _field(key: str) -> str:
    if key == "source":
        return "source"
    if key in COLUMNS:
        return f'$meta["{RENAMED_KEY}"]["{key}"]'
    return f'$meta["{key}"]'


def milvus_expression(checked: CheckedFilter) -> str:
    """Every key matches one of its values. ``source`` is compared in its column, as written there
    (a long source cut to its prefix and hash, a non-string source as its text)."""
    parts = []
    for key, values in checked.items():
        field = _field(key)
        if key == "source":
            values = [source_column(str(v)) for v in values]
        terms = [f"{field} == {literal(v)}" for v in values]
        parts.append(terms[0] if len(terms) == 1 else "(" + " or ".join(terms) + ")")
    return " and ".join(parts)
