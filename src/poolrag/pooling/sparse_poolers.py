"""Sparse (token id → weight) vectors from hidden states: SPLADE and BGE-M3's three heads.

A sparse result leaves the pooler as a record array of :data:`~poolrag.outputs.SPARSE_ENTRY`
(token id, weight), sorted by id, holding only non-zero weights: a SPLADE vector over a 30k or
250k vocabulary has a few hundred of them.
"""

from __future__ import annotations

import itertools
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
from poolrag.runner.forward_output import ForwardOutput, PackedStates


def sparse_entries(indices: np.ndarray, values: np.ndarray) -> np.ndarray:
    """A :data:`SPARSE_ENTRY` record array from ids and weights already sorted by id."""
    out = np.empty(len(indices), dtype=SPARSE_ENTRY)
    out["index"] = indices
    out["value"] = values
    return out


# Vocabulary logits held at once by SPLADE pooling: 2**26 floats (256 MB in fp32), e.g. 2,200 tokens
# over BERT's 30k vocabulary; a single longer sequence still runs, alone.
_LOGITS_BUDGET = 2**26


def _keep_largest(pooled: torch.Tensor, k: int) -> torch.Tensor:
    """``pooled`` with all but its ``k`` largest weights set to zero."""
    values, ids = pooled.topk(min(k, pooled.numel()))
    return torch.zeros_like(pooled).index_copy_(0, ids, values)


def _entries_of_rows(pooled: torch.Tensor) -> list[np.ndarray]:
    """The non-zero entries of each row of ``[B, V]`` weights, with one device-to-host copy."""
    rows, ids = torch.nonzero(pooled > 0, as_tuple=True)  # row-major: ids sorted within a row
    values = to_numpy(pooled[rows, ids])
    counts = np.bincount(rows.cpu().numpy(), minlength=pooled.shape[0])
    host_ids = ids.cpu().numpy()
    bounds = np.concatenate([[0], np.cumsum(counts)])
    return [sparse_entries(host_ids[a:b], values[a:b]) for a, b in itertools.pairwise(bounds)]


class SpladePooler:
    """SPLADE: the MLM head on every token, ``log(1 + relu(logits))`` (twice ``log1p`` for
    ``log1p_relu``), reduced over each sequence's tokens by ``max`` or ``sum``.

    Consecutive sequences are pooled together up to a budget of logits, so a batch's whole
    ``[tokens, vocabulary]`` matrix is never held at once (a 16k-token batch over a 30k vocabulary
    would be 2 GB in fp32) and short texts still share one head matmul.
    """

    def __init__(
        self,
        mlm_head: nn.Module,
        vocab_size: int,
        pooling_strategy: str,
        activation_function: str,
        max_active_dims: int | None = None,
        dropped_ends: tuple[int | None, int | None] = (None, None),
    ) -> None:
        self.mlm_head = mlm_head
        self.max_active_dims = max_active_dims  # the folder's, where a call names none
        self.rows_per_chunk = max(1, _LOGITS_BUDGET // vocab_size)
        self.reduce_max = pooling_strategy == "max"
        self.twice = activation_function == "log1p_relu"
        # token ids left out of the pooling at a sequence's start and end (vLLM's
        # BertSpladeSparseEmbeddingModel: the config's cls_token_id and sep_token_id)
        self.dropped_ends = dropped_ends

    def __call__(self, output: ForwardOutput, requests: Sequence[PoolingRequest]) -> list[np.ndarray]:
        tokens = output.tokens
        assert tokens is not None
        states, lengths = self._pooled_rows(tokens)
        budget = self.rows_per_chunk
        results: list[np.ndarray] = []
        first, row = 0, 0
        while first < len(lengths):
            last, rows = first, 0
            while last < len(lengths) and (last == first or rows + lengths[last] <= budget):
                rows += lengths[last]
                last += 1
            pooled = self._pool(states[row : row + rows], lengths[first:last])
            for i, request in enumerate(requests[first:last]):
                limit = request.params.max_active_dims or self.max_active_dims
                if limit is not None:
                    pooled[i] = _keep_largest(pooled[i], limit)
            results += _entries_of_rows(pooled)
            first, row = last, row + rows
        return results

    def _pooled_rows(self, tokens: PackedStates) -> tuple[torch.Tensor, list[int]]:
        """The rows to pool and each sequence's count of them: every row, or all but a first row
        holding ``dropped_ends[0]`` and a last holding ``dropped_ends[1]`` (as vLLM's
        ``SPLADESparsePooler``; a sequence left with no row pools to zeros)."""
        head, tail = self.dropped_ends
        if head is None and tail is None:
            return tokens.states, tokens.lengths.tolist()
        ids, lengths = tokens.token_ids, tokens.lengths
        keep = torch.ones_like(ids, dtype=torch.bool)
        firsts = tokens.offsets
        for rows, token_id in ((firsts, head), (firsts + lengths - 1, tail)):
            if token_id is not None:
                keep[rows[ids[rows] == token_id]] = False
        sequence = torch.repeat_interleave(torch.arange(len(lengths), device=ids.device), lengths)
        kept = torch.bincount(sequence[keep], minlength=len(lengths))
        return tokens.states[keep], kept.tolist()

    def _pool(self, states: torch.Tensor, lengths: list[int]) -> torch.Tensor:
        """``[len(lengths), V]`` pooled weights of consecutive sequences (zeros for one of no rows)."""
        weights = torch.log1p(torch.relu(self.mlm_head(states).float()))
        if self.twice:
            weights = torch.log1p(weights)
        parts = torch.split(weights, lengths)
        empty = weights.new_zeros(weights.shape[-1])
        return torch.stack(
            [empty if not len(p) else p.amax(0) if self.reduce_max else p.sum(0) for p in parts]
        )


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
