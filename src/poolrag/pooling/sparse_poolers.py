"""Sparse (token id → weight) vectors from hidden states: SPLADE and BGE-M3's three heads.

A sparse result leaves the pooler as a record array of :data:`~poolrag.outputs.SPARSE_ENTRY`
(token id, weight), sorted by id, holding only non-zero weights: a SPLADE vector over a 30k or
250k vocabulary has a few hundred of them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from poolrag.outputs import SPARSE_ENTRY
from poolrag.params import MULTI_VECTOR_TASK
from poolrag.pooling.heads import MatryoshkaHead, to_numpy
from poolrag.pooling.methods import PoolingMethod
from poolrag.request import PoolingRequest
from poolrag.runner.forward_output import ForwardOutput


def sparse_entries(indices: np.ndarray, values: np.ndarray) -> np.ndarray:
    """A :data:`SPARSE_ENTRY` record array from ids and weights already sorted by id."""
    out = np.empty(len(indices), dtype=SPARSE_ENTRY)
    out["index"] = indices
    out["value"] = values
    return out


def _top_weights(pooled: torch.Tensor, max_active_dims: int | None) -> np.ndarray:
    """The non-zero entries of one vocabulary-sized vector (the ``max_active_dims`` largest)."""
    ids = torch.nonzero(pooled > 0).squeeze(1)
    values = pooled[ids]
    if max_active_dims is not None and ids.numel() > max_active_dims:
        values, order = values.topk(max_active_dims)
        ids = ids[order]
        ids, order = ids.sort()
        values = values[order]
    return sparse_entries(ids.cpu().numpy(), to_numpy(values))


class SpladePooler:
    """SPLADE: the MLM head on every token, ``log(1 + relu(logits))`` (twice ``log1p`` for
    ``log1p_relu``), reduced over the tokens by ``max`` or ``sum``.

    One sequence at a time, so the ``[tokens, vocabulary]`` logits of a whole batch are never
    held at once (a 16k-token batch over a 30k vocabulary would be 2 GB in fp32).
    """

    def __init__(self, mlm_head: nn.Module, pooling_strategy: str, activation_function: str) -> None:
        self.mlm_head = mlm_head
        self.reduce_max = pooling_strategy == "max"
        self.twice = activation_function == "log1p_relu"

    def __call__(self, output: ForwardOutput, requests: Sequence[PoolingRequest]) -> list[np.ndarray]:
        tokens = output.tokens
        assert tokens is not None
        results: list[np.ndarray] = []
        for rows, request in zip(tokens.split(), requests, strict=True):
            weights = torch.log1p(torch.relu(self.mlm_head(rows).float()))
            if self.twice:
                weights = torch.log1p(weights)
            pooled = weights.amax(0) if self.reduce_max else weights.sum(0)
            results.append(_top_weights(pooled, request.params.max_active_dims))
        return results


class LexicalHeadsPooler:
    """BGE-M3: every task of the model pools the same hidden states, so one pooler serves them all
    and a batch mixing them runs one forward pass.

    * ``embed`` / ``score``: the pooled (CLS) vector, normalised as the folder says;
    * ``sparse_embed``: ``relu(sparse_linear(h))`` per token, the max per token id, special tokens
      (``excluded_ids``: cls, eos, pad, unk) and zero weights dropped;
    * ``token_embed``: ``colbert_linear(h)`` of every token after the first, L2-normalised;
    * :data:`~poolrag.params.MULTI_VECTOR_TASK`: the three at once, as a 3-item object array
      ``[dense, sparse, colbert]``.
    """

    def __init__(
        self,
        method: PoolingMethod,
        dense_head: MatryoshkaHead,
        sparse_linear: nn.Linear,
        colbert_linear: nn.Linear,
        excluded_ids: frozenset[int],
    ) -> None:
        self.method = method
        self.dense_head = dense_head
        self.sparse_linear = sparse_linear
        self.colbert_linear = colbert_linear
        self.excluded = np.array(sorted(excluded_ids), dtype=np.int64)

    def __call__(self, output: ForwardOutput, requests: Sequence[PoolingRequest]) -> list[np.ndarray]:
        tokens = output.tokens
        assert tokens is not None
        tasks = [r.params.task for r in requests]
        multi = MULTI_VECTOR_TASK in tasks
        wants_dense = multi or bool({"embed", "score"} & set(tasks))
        dense = self.dense_head(self.method(tokens), requests) if wants_dense else []
        lengths = tokens.lengths.tolist()
        sparse = (
            self._sparse(tokens.states, tokens.token_ids, lengths, requests)
            if multi or "sparse_embed" in tasks
            else []
        )
        colbert = self._colbert(tokens.states, lengths, requests) if multi or "token_embed" in tasks else []
        results: list[np.ndarray] = []
        for i, task in enumerate(tasks):
            if task == MULTI_VECTOR_TASK:
                parts = np.empty(3, dtype=object)
                parts[0], parts[1], parts[2] = dense[i], sparse[i], colbert[i]
                results.append(parts)
            elif task == "sparse_embed":
                results.append(sparse[i])
            elif task == "token_embed":
                results.append(colbert[i])
            else:
                results.append(dense[i])
        return results

    def _sparse(
        self,
        states: torch.Tensor,
        token_ids: torch.Tensor,
        lengths: list[int],
        requests: Sequence[PoolingRequest],
    ) -> list[np.ndarray]:
        weights = to_numpy(torch.relu(self.sparse_linear(states)).squeeze(-1))
        ids = token_ids.cpu().numpy()
        out: list[np.ndarray] = []
        start = 0
        for n, request in zip(lengths, requests, strict=True):
            seq_ids, seq_weights = ids[start : start + n], weights[start : start + n]
            start += n
            keep = (seq_weights > 0) & ~np.isin(seq_ids, self.excluded)
            unique, slot = np.unique(seq_ids[keep], return_inverse=True)
            best = np.zeros(len(unique), dtype=np.float32)
            np.maximum.at(best, slot, seq_weights[keep])
            limit = request.params.max_active_dims
            if limit is not None and len(unique) > limit:
                top = np.sort(np.argsort(-best, kind="stable")[:limit])
                unique, best = unique[top], best[top]
            out.append(sparse_entries(unique, best))
        return out

    def _colbert(
        self, states: torch.Tensor, lengths: list[int], requests: Sequence[PoolingRequest]
    ) -> list[np.ndarray]:
        vectors = self.colbert_linear(states).float()
        normed = to_numpy(F.normalize(vectors, p=2, dim=-1))
        raw = to_numpy(vectors) if any(not r.params.normalize for r in requests) else normed
        out: list[np.ndarray] = []
        start = 0
        for n, request in zip(lengths, requests, strict=True):
            rows = slice(start + 1, start + n)  # the first token (CLS) has no ColBERT vector
            # multi_vector's ``normalize`` is embed's; its ColBERT part is normalised as token_embed's
            unit = request.params.normalize or request.params.task == MULTI_VECTOR_TASK
            out.append(normed[rows] if unit else raw[rows])
            start += n
        return out
