"""Matryoshka truncation of full-size vectors, and the rules for which sizes are allowed.

The engine truncates before it normalises; truncating an already-normalised full vector and
renormalising gives the same vector (normalisation is scale-invariant), which is what lets one
cached full vector serve every smaller ``dimensions``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from poolrag.errors import DimensionsError


def check_dimensions(engine: Any, dimensions: int | None) -> None:
    """Raise :class:`DimensionsError` unless ``dimensions`` is a size the engine's model supports."""
    if dimensions is None:
        return
    if isinstance(dimensions, bool) or not isinstance(dimensions, int):
        raise DimensionsError("dimensions must be an integer")
    full = int(engine.embedding_dim or 0)
    if dimensions <= 0 or dimensions > full:
        raise DimensionsError(f"dimensions must be between 1 and {full}, got {dimensions}")
    if dimensions == full:
        return
    if not engine.is_matryoshka:
        raise DimensionsError(
            f"{engine.model_name} is not a Matryoshka model, so its vectors cannot be truncated to "
            f"{dimensions} dimensions meaningfully; omit dimensions (full size is {full}), or declare "
            'the model Matryoshka (hf_overrides={"is_matryoshka": True}) only if it was trained for it'
        )
    allowed = engine.spec.matryoshka_dimensions
    if allowed is not None and dimensions not in allowed:
        raise DimensionsError(f"dimensions must be one of {list(allowed)}, got {dimensions}")


def truncate(vectors: np.ndarray, dimensions: int | None, normalize: bool) -> np.ndarray:
    """First ``dimensions`` components of each row, renormalised to unit length if ``normalize``."""
    if dimensions is None or dimensions >= vectors.shape[-1]:
        return vectors
    out = np.ascontiguousarray(vectors[..., :dimensions], dtype=np.float32)
    if normalize:
        norms = np.linalg.norm(out, axis=-1, keepdims=True)
        out = out / np.maximum(norms, 1e-12)
    return out.astype(np.float32, copy=False)
