"""Heads: turn pooled rows into the numbers a task returns.

Each head takes the requests of the batch so that per-request parameters (Matryoshka size,
normalisation, activation) apply even when callers with different parameters share a batch.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from poolrag.pooling.matryoshka import truncate
from poolrag.request import PoolingRequest, ResolvedParams

if TYPE_CHECKING:
    from poolrag.pooling.step_reward import StepProjection

ActivationName = Literal["softmax", "sigmoid", "identity", "tanh"]  # tanh: a CrossEncoder saved with it


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """One device-to-host copy, always float32."""
    return t.detach().float().cpu().numpy()


def on_device_of(module: nn.Module, rows: torch.Tensor) -> torch.Tensor:
    """``rows`` moved to ``module``'s device (device_map may put a head on another device)."""
    param = next(module.parameters(), None)
    return rows if param is None or param.device == rows.device else rows.to(param.device)


def activate(logits: torch.Tensor, activation: ActivationName) -> torch.Tensor:
    logits = logits.float()
    if activation == "softmax":
        return torch.softmax(logits, dim=-1)
    if activation == "sigmoid":
        return torch.sigmoid(logits)
    if activation == "tanh":
        return torch.tanh(logits)
    return logits


def _groups(requests: Sequence[PoolingRequest]) -> dict[ResolvedParams, list[int]]:
    groups: dict[ResolvedParams, list[int]] = defaultdict(list)
    for i, req in enumerate(requests):
        groups[req.params].append(i)
    return groups


class MatryoshkaHead(nn.Module):
    """Optional projection, then truncate to ``dimensions``, then L2-normalise (in that order,
    so a truncated vector is still a unit vector).

    A normalised vector of fewer ``dimensions`` is cut on the host from the full vector this head
    returns, by :func:`~poolrag.pooling.matryoshka.truncate` as the embedding cache cuts a stored full
    vector, so both give the same bytes: a float32 rounding apart, a value at the edge of a uint8
    range or bucket lands in another bucket, and ``ingest --dimensions`` would store other bytes
    than the server sends for ``output_dimension``.
    """

    def __init__(self, projection: nn.Module | None = None) -> None:
        super().__init__()
        self.projection = projection

    def forward(self, pooled: torch.Tensor, requests: Sequence[PoolingRequest]) -> list[np.ndarray]:
        vectors = self.projection(pooled) if self.projection is not None else pooled
        vectors = vectors.float()
        groups = _groups(requests)
        if len(groups) == 1:  # one set of parameters: no gather of rows
            return list(_cut(vectors, requests[0].params))
        results: list[np.ndarray] = [np.empty(0, np.float32)] * len(requests)
        for params, rows in groups.items():
            host = _cut(vectors[rows], params)
            for row, i in enumerate(rows):
                results[i] = host[row]
        return results


def _cut(vectors: torch.Tensor, params: ResolvedParams) -> np.ndarray:
    """``vectors`` at ``params``' size and normalisation, on the host: the full vectors as the model
    gives them, and a smaller size cut from those as the embedding cache cuts them."""
    full = to_numpy(truncate(vectors, None, params.normalize))
    dims = params.dimensions
    return full if dims is None or dims >= full.shape[-1] else truncate(full, dims, params.normalize)


class TokenEmbeddingHead(nn.Module):
    """ColBERT-style per-token vectors: project every row, drop skiplist tokens of documents,
    cut each token vector to the request's ``dimensions`` and normalise it (in that order)."""

    def __init__(self, projection: nn.Module | None, skiplist: frozenset[int] = frozenset()) -> None:
        super().__init__()
        self.projection = projection
        self.skiplist = torch.tensor(sorted(skiplist), dtype=torch.long) if skiplist else None

    def forward(
        self,
        states: torch.Tensor,
        token_ids: torch.Tensor,
        lengths: list[int],
        requests: Sequence[PoolingRequest],
    ) -> list[np.ndarray]:
        vectors = self.projection(states) if self.projection is not None else states
        vectors = vectors.float()
        host = to_numpy(vectors)
        whole = any(r.params.normalize and r.params.dimensions is None for r in requests)
        host_normed = to_numpy(F.normalize(vectors, p=2, dim=-1)) if whole else host
        if self.skiplist is not None:
            keep = ~torch.isin(token_ids, self.skiplist.to(token_ids.device)).cpu().numpy()
        out: list[np.ndarray] = []
        start = 0
        for n, req in zip(lengths, requests, strict=True):
            rows = slice(start, start + n)
            if req.params.dimensions is not None:
                data = truncate(host[rows], req.params.dimensions, req.params.normalize)
            else:
                data = host_normed[rows] if req.params.normalize else host[rows]
            if req.params.input_type != "query" and self.skiplist is not None:
                data = data[keep[rows]]
            out.append(data)
            start += n
        return out


class ClassifierHead:
    """Sequence logits → probabilities (or logits when ``use_activation`` is off), each logit first
    calibrated to ``(logit - logit_mean) / logit_sigma`` (vLLM's pooler options; 0 and 1 by default)."""

    def __init__(self, activation: ActivationName, logit_mean: float = 0.0, logit_sigma: float = 1.0) -> None:
        self.activation = activation
        self.logit_mean = logit_mean
        self.logit_sigma = logit_sigma

    def __call__(self, logits: torch.Tensor, requests: Sequence[PoolingRequest]) -> list[np.ndarray]:
        if self.logit_mean != 0.0 or self.logit_sigma != 1.0:
            logits = (logits - self.logit_mean) / self.logit_sigma
        probs = to_numpy(activate(logits, self.activation))
        raw = to_numpy(logits) if any(not r.params.use_activation for r in requests) else probs
        return [probs[i] if r.params.use_activation else raw[i] for i, r in enumerate(requests)]


class TokenClassifierHead:
    """Per-token logits → per-token probabilities; STEP selection and column choice for PRMs.

    With a ``projection`` (a process reward model's lm_head rows or reward head) the rows are
    hidden states instead, projected only at the step tags and onto the requested columns, so a
    vocabulary-sized head never runs on every token.
    """

    def __init__(self, activation: ActivationName, projection: StepProjection | None = None) -> None:
        self.activation = activation
        self.projection = projection

    @torch.inference_mode()  # the states come from inference mode: no head may track gradients on them
    def __call__(
        self,
        logits: torch.Tensor,
        token_ids: torch.Tensor,
        lengths: list[int],
        requests: Sequence[PoolingRequest],
    ) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for rows, ids, req in zip(
            torch.split(logits, lengths), torch.split(token_ids, lengths), requests, strict=True
        ):
            params = req.params
            if params.task == "reward" and params.step_tag_id is not None:
                rows = rows[ids == params.step_tag_id]
            if self.projection is not None:
                rows = self.projection(rows, params.returned_token_ids)
            elif params.returned_token_ids:
                rows = rows[:, list(params.returned_token_ids)]
            out.append(to_numpy(activate(rows, self.activation) if params.use_activation else rows))
        return out
