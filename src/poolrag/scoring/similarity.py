"""Similarity functions on host arrays: the bi-encoder ones sentence-transformers names in
``similarity_fn_name``, and MaxSim for per-token (ColBERT) vectors."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from poolrag.errors import ModelLoadError

Similarity = Callable[[np.ndarray, np.ndarray], float]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(np.dot(a, b) / denom) if denom else 0.0


def dot(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


def neg_euclidean(a: np.ndarray, b: np.ndarray) -> float:
    return -float(np.linalg.norm(a - b))


def neg_manhattan(a: np.ndarray, b: np.ndarray) -> float:
    return -float(np.abs(a - b).sum())


def maxsim(query: np.ndarray, document: np.ndarray) -> float:
    """Late interaction: for each query token the best-matching document token, summed."""
    if len(query) == 0 or len(document) == 0:
        return 0.0
    return float((query @ document.T).max(axis=1).sum())


_BY_NAME: dict[str, Similarity] = {
    "cosine": cosine,
    "dot": dot,
    "dot_product": dot,
    "euclidean": neg_euclidean,
    "manhattan": neg_manhattan,
    "maxsim": maxsim,
}


def similarity_by_name(name: str | None) -> Similarity:
    """The function a model folder asks for (cosine when it names none), higher = more similar."""
    if name is None:
        return cosine
    try:
        return _BY_NAME[name.lower()]
    except KeyError:
        raise ModelLoadError(f"unknown similarity function {name!r}; known: {sorted(_BY_NAME)}") from None
