"""Matryoshka truncation of full-size vectors.

The engine truncates before it normalises; truncating an already-normalised full vector and
renormalising gives the same vector (normalisation is scale-invariant), which is what lets one
cached full vector serve every smaller ``dimensions``. Which sizes are allowed is not decided
here: :meth:`poolrag.params.PoolingParams.verify` is the one rule.
"""

from __future__ import annotations

import numpy as np


def truncate(vectors: np.ndarray, dimensions: int | None, normalize: bool) -> np.ndarray:
    """First ``dimensions`` components of each row, renormalised to unit length if ``normalize``."""
    if dimensions is None or dimensions >= vectors.shape[-1]:
        return vectors
    out = np.ascontiguousarray(vectors[..., :dimensions], dtype=np.float32)
    if normalize:
        norms = np.linalg.norm(out, axis=-1, keepdims=True)
        out = out / np.maximum(norms, 1e-12)
    return out.astype(np.float32, copy=False)
