"""The one rule for a count a caller passes (``k``, ``limit``, ``top_n``, a batch size, a length).

A count arrives from Python callers, adapters' fields, CLI flags and request bodies; ``True`` is an
``int`` to Python and ``0`` would mean "nothing" to some callees and "the default" to others, so
every door refuses both the same way, with one line naming the argument.
"""

from __future__ import annotations

import numbers

from poolrag.errors import InvalidInputError


def check_count(value: object, name: str) -> int:
    """``value`` as an ``int`` when it is a positive integer (a numpy one too, not a ``bool``);
    else one line naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise InvalidInputError(f"{name} must be a positive integer, not {value!r}")
    return int(value)


def check_optional_count(value: object, name: str) -> int | None:
    """:func:`check_count` where ``None`` means "unset" (all, the default)."""
    return None if value is None else check_count(value, name)
