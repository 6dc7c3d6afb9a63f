"""Ordering scored candidates, shared by the rerankers of both frameworks."""

from __future__ import annotations

import numpy as np

from poolrag import InvalidInputError


def best_first(scores: np.ndarray, top_n: int | None) -> list[int]:
    """Indices of the ``top_n`` highest scores (all when ``None``), best first; ties keep input order."""
    if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1):
        raise InvalidInputError(f"top_n must be a positive integer or None, got {top_n!r}")
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    return [int(i) for i in order[:top_n]]
