"""Ordering scored candidates: the one rule both frameworks' rerankers follow."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from poolrag.errors import InvalidInputError


def check_top_n(top_n: int | None, name: str = "top_n") -> None:
    """Refuse a count that is not a positive integer (``None`` means all) before any model call."""
    if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1):
        raise InvalidInputError(f"{name} must be a positive integer, got {top_n!r}")


def best_first(scores: np.ndarray | Sequence[float], top_n: int | None) -> list[int]:
    """Indices of the ``top_n`` highest scores (all when ``None``), best first; ties keep input order,
    so equal scores never reshuffle what the retriever ranked."""
    check_top_n(top_n)
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    return [int(i) for i in order[:top_n]]
