"""Cosine for single vectors, MaxSim for per-token vectors (both on host arrays)."""

from __future__ import annotations

import numpy as np


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(np.dot(a, b) / denom) if denom else 0.0


def maxsim(query: np.ndarray, document: np.ndarray) -> float:
    """Late interaction: for each query token the best-matching document token, summed."""
    if len(query) == 0 or len(document) == 0:
        return 0.0
    return float((query @ document.T).max(axis=1).sum())
