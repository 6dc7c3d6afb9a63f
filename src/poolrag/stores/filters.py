"""Metadata filters: exact matches on payload keys, checked once before any store sees them.

A filter maps a payload key to a value (``{"topic": "biology"}``) or to a list of accepted values
(``{"topic": ["biology", "geography"]}``); every key must match. Values are scalars only (strings,
integers, floats, booleans), so each store can express the filter natively and all stores agree
on what matches. Keys are identifiers, so no key can break out of a store's filter syntax (Milvus
builds a text expression from them); values are quoted by the store that needs quoting.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from poolrag.errors import InvalidInputError

Scalar = str | int | float | bool
MetadataFilter = Mapping[str, Scalar | Sequence[Scalar]]
#: A checked filter: key -> accepted values (one or more).
CheckedFilter = dict[str, list[Scalar]]

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
#: ASCII control characters: no filter value, and no Milvus string literal, holds one
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")


def check_filter(filter: MetadataFilter | None) -> CheckedFilter | None:
    """A validated copy of ``filter`` with every value turned into a list; ``None`` for no filter."""
    if filter is None:
        return None
    if not isinstance(filter, Mapping):
        raise InvalidInputError(
            f"filter must be a mapping of metadata key to value, not {type(filter).__name__}"
        )
    checked: CheckedFilter = {}
    for key, value in filter.items():
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise InvalidInputError(
                f"filter keys must be identifiers (letters, digits, '_'; not starting with a digit), "
                f"got {key!r}"
            )
        values = list(value) if isinstance(value, (list, tuple, set, frozenset)) else [value]
        if not values:
            raise InvalidInputError(f"filter value for {key!r} is an empty list: nothing could match")
        checked[key] = [_check_value(key, v) for v in values]
    return checked or None


def _check_value(key: str, value: Any) -> Scalar:
    if isinstance(value, str):
        if CONTROL_CHARACTERS.search(value):
            raise InvalidInputError(f"filter value for {key!r} contains a control character")
        return value
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInputError(f"filter value for {key!r} must be a finite number, got {value!r}")
    if isinstance(value, (bool, int, float)):
        return value
    raise InvalidInputError(
        f"filter value for {key!r} must be a string, number or boolean (or a list of them), "
        f"got {type(value).__name__}"
    )


def _same(stored: Any, wanted: Scalar) -> bool:
    # Booleans are not numbers here (as in Qdrant and Milvus): True never matches 1.
    if isinstance(wanted, bool) or isinstance(stored, bool):
        return isinstance(stored, bool) and isinstance(wanted, bool) and stored == wanted
    if isinstance(wanted, str):
        return isinstance(stored, str) and stored == wanted
    return isinstance(stored, (int, float)) and stored == wanted


def matches(payload: Mapping[str, Any], filter: CheckedFilter | None) -> bool:
    """Whether ``payload`` satisfies a :func:`check_filter`-ed filter (a missing key never matches)."""
    if not filter:
        return True
    return all(
        key in payload and any(_same(payload[key], v) for v in values) for key, values in filter.items()
    )
