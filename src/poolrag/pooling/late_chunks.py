"""Late chunking's pooler: one mean-pooled vector per chunk span of a window's rows.

Each window of a document (:class:`~poolrag.tokenization.late_chunks.LateChunkRequest`) names
the rows of its chunks; each chunk's rows are averaged in fp32 as :class:`MeanPool` averages a
whole sequence, then go through the model's embedding head (projection, Matryoshka size,
normalisation), so a chunk vector is finished exactly as an ``embed`` vector is.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from poolrag.pooling.heads import MatryoshkaHead
from poolrag.request import PoolingRequest
from poolrag.runner.forward_output import ForwardOutput
from poolrag.tokenization.late_chunks import LateChunkRequest


class LateChunkPooler:
    def __init__(self, head: MatryoshkaHead) -> None:
        self.head = head

    def __call__(self, output: ForwardOutput, requests: Sequence[PoolingRequest]) -> list[np.ndarray]:
        tokens = output.tokens
        assert tokens is not None
        results = []
        for base, request in zip(tokens.offsets.tolist(), requests, strict=True):
            assert isinstance(request, LateChunkRequest)
            rows = torch.stack(
                [tokens.states[base + start : base + end].float().mean(0) for start, end in request.row_spans]
            ).to(tokens.states.dtype)
            results.append(np.stack(self.head(rows, [request] * len(rows))))
        return results
