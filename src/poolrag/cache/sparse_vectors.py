"""Learned sparse vectors (SPLADE, BGE-M3's sparse head) through the embedding cache.

A text's sparse vector depends on the sparse model and the per-call parameters only, so it is
cached under :func:`~poolrag.cache.keys.cache_namespace` with the ``sparse_embed`` task: a namespace
no dense vector or BM25 term count can share. The row is ``[n, id, weight, id, weight, ...]`` in
float32 (the leading count keeps an empty vector a non-empty row); ids at or above 2**24 would not
survive float32, so such a vector is simply not cached.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from poolrag.cache.keys import cache_namespace, missing_items, text_key
from poolrag.cache.sqlite_store import EmbeddingCache
from poolrag.errors import InvalidInputError, at_position
from poolrag.model_facts import ModelFacts
from poolrag.params import PoolingParams
from poolrag.sparse.vector import SparseVector

_EXACT_LIMIT = 1 << 24  # float32 holds every integer below this exactly

#: Computes sparse vectors for texts the cache lacks (``Engine.sparse_embed`` with fixed params).
SparseCompute = Callable[[list[str]], list[SparseVector]]


class CachedSparseVectors:
    """Sparse vectors of one model and parameter set, from the cache where present.

    Args:
        facts: the sparse model's facts (its identity and output settings key the entries).
        params: the per-call parameters (``input_type``, ``max_active_dims``) the vectors are made with.
        compute: makes vectors for the texts the cache lacks.
        cache: where vectors persist; ``None`` computes every time (the counters still work).
    """

    def __init__(
        self,
        facts: ModelFacts,
        params: PoolingParams,
        compute: SparseCompute,
        cache: EmbeddingCache | None = None,
    ) -> None:
        self.namespace = cache_namespace(facts, "sparse_embed", params.with_updates(dimensions=None))
        self.compute = compute
        self.cache = cache
        self._fresh: dict[bytes, SparseVector] = {}  # made by a shared forward pass, not yet read
        self.hits = 0
        self.misses = 0

    def remember(self, texts: Sequence[str], vectors: Sequence[SparseVector]) -> None:
        """Keep vectors another forward pass produced (BGE-M3's dense call): cached, and held until
        the next :meth:`vectors` call even without a cache. They count as computed."""
        keys = [text_key(self.namespace, t) for t in texts]
        fresh = dict(zip(keys, vectors, strict=True))
        self._fresh.update(fresh)
        self.misses += len(fresh)
        self._put(fresh)

    def vectors(self, texts: Sequence[str]) -> list[SparseVector]:
        """Each text's sparse vector; only texts neither cached nor just remembered are computed."""
        texts = list(texts)
        keys = [text_key(self.namespace, t) for t in texts]
        wanted = set(keys)
        found = {k: v for k, v in self._fresh.items() if k in wanted}
        self._fresh = {}
        rows = self.cache.get_many([k for k in keys if k not in found]) if self.cache is not None else {}
        for key, row in rows.items():
            vector = _from_row(row)
            if vector is not None:
                found[key] = vector
        missing = missing_items(texts, keys, found)
        computed = {}
        if missing:
            try:
                made = self.compute([text for _, text, _ in missing])
            except InvalidInputError as exc:  # input[i] of the texts computed: the caller's input[where]
                raise at_position(exc, [where for _, _, where in missing]) from None
            computed = dict(zip((key for key, _, _ in missing), made, strict=True))
        self._put(computed)
        self.misses += len(computed)
        self.hits += len(texts) - len(missing)
        merged = {**found, **computed}
        return [merged[k] for k in keys]

    def _put(self, vectors: dict[bytes, SparseVector]) -> None:
        if self.cache is not None and vectors:
            self.cache.put_many({k: _to_row(v) for k, v in vectors.items() if _fits(v)})


def _fits(vector: SparseVector) -> bool:
    return len(vector) == 0 or int(vector.indices[-1]) < _EXACT_LIMIT


def _to_row(vector: SparseVector) -> np.ndarray:
    row = np.empty(1 + 2 * len(vector), dtype=np.float32)
    row[0] = len(vector)
    row[1::2] = vector.indices
    row[2::2] = vector.values
    return row


def _from_row(row: np.ndarray) -> SparseVector | None:
    """The vector a row holds, or ``None`` for a row of another shape (never trusted blindly)."""
    if row.size < 1 or row.size != 1 + 2 * int(row[0]):
        return None
    return SparseVector(row[1::2].astype(np.int64), row[2::2])
