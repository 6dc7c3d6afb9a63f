"""Matryoshka truncation: the one function that cuts vectors to ``dimensions`` and renormalises.

The embedding head applies it to pooled rows on the model's device for the full size, the chunk
join to the weighted mean of a long input's chunks, and both, like the cache, cut a smaller size
from that full float32 vector on the host, so a vector cut from a cached full one is, byte for
byte, the one the engine returns for that size (normalisation is scale-invariant, so renormalising
a cut of a unit vector gives the cut of the raw vector, normalised, to float32 rounding). Which
sizes are allowed is not decided here: :meth:`poolrag.params.PoolingParams.verify` is the one rule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

import numpy as np

if TYPE_CHECKING:
    import torch

Vectors = TypeVar("Vectors", np.ndarray, "torch.Tensor")

_EPS = 1e-12  # the floor under a norm, as torch's F.normalize: an all-zero row stays zero


def truncate(vectors: Vectors, dimensions: int | None, normalize: bool) -> Vectors:
    """The first ``dimensions`` components of each row (``None``: all), L2-normalised if ``normalize``.

    Rows are the last axis, so one vector and a batch of them cut the same way; a numpy result is
    contiguous and keeps the input's dtype, a tensor stays on its device.
    """
    if dimensions is not None and dimensions < vectors.shape[-1]:
        vectors = vectors[..., :dimensions]
    if isinstance(vectors, np.ndarray):
        out = np.ascontiguousarray(vectors)
        if normalize:
            out = out / np.maximum(np.linalg.norm(out, axis=-1, keepdims=True), _EPS)
        return out
    import torch.nn.functional as F  # here, not at the top: numpy callers (the cache) need no torch

    return F.normalize(vectors, p=2, dim=-1, eps=_EPS) if normalize else vectors
