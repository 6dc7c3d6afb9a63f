"""Two-stage retrieval (the Matryoshka funnel), plus an optional cross-encoder rerank.

Stage 1 recalls candidates with the small vectors stored in the database (cheap to store and to
search); stage 2 re-scores them with full-size vectors taken from the embedding cache, filled
when the chunks were ingested (a cache miss, e.g. on another machine, recomputes from the chunk
text in the payload); stage 3 optionally reranks the survivors with a cross-encoder.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from poolrag.cache.embedder import CachedEmbedder
from poolrag.cache.matryoshka import truncate
from poolrag.errors import InvalidInputError
from poolrag.params import PoolingParams
from poolrag.retrieval.rerank import CrossEncoderReranker
from poolrag.retrieval.results import SearchResult
from poolrag.stores.base import CollectionSpec, VectorStore, weights_fingerprint
from poolrag.stores.errors import CollectionMismatchError, CollectionNotFoundError

logger = logging.getLogger(__name__)


def _spec_of(store: VectorStore) -> CollectionSpec:
    spec = store.read_spec()
    if spec is None:
        raise CollectionNotFoundError(
            f"collection {store.collection!r} does not exist in {store.name} at {store.location}; "
            "ingest into it first"
        )
    return spec


def _check_model(spec: CollectionSpec, identity: str, where: str) -> None:
    if weights_fingerprint(spec.model_identity) != weights_fingerprint(identity):
        raise CollectionMismatchError(
            f"collection {spec.name!r} in {where} was filled with {spec.model_identity}, but the query "
            f"model is {identity}; search with the model the collection was ingested with"
        )


class Retriever:
    """Search one dense collection: small-vector recall → full-vector re-score → optional rerank.

    Args:
        store: the collection (its metadata says the stored size and the model).
        embedder: the same model (and cache) the collection was ingested with.
        reranker: a cross-encoder engine or :class:`CrossEncoderReranker` for the last stage.
        candidates: how many hits stage 1 returns; default ``max(10 * k, 50)`` when a later stage
            re-scores them, else ``k``.
    """

    def __init__(
        self,
        store: VectorStore,
        embedder: CachedEmbedder,
        *,
        reranker: Any | None = None,
        candidates: int | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.spec = _spec_of(store)
        if self.spec.layout != "dense":
            raise InvalidInputError(
                f"collection {self.spec.name!r} holds ColBERT token vectors; use ColbertRetriever"
            )
        _check_model(self.spec, embedder.model_identity, f"{store.name} at {store.location}")
        if reranker is not None and not isinstance(reranker, CrossEncoderReranker):
            reranker = CrossEncoderReranker(reranker)
        self.reranker = reranker
        self.candidates = candidates

    @property
    def dimension(self) -> int:
        return self.spec.dimension

    def search(
        self, query: str, k: int = 10, *, candidates: int | None = None, rescore: bool = True
    ) -> list[SearchResult]:
        """The ``k`` best chunks for ``query``; ``rescore=False`` skips stage 2 (for comparison)."""
        if k <= 0:
            raise InvalidInputError("k must be positive")
        full = self.embedder.embed_query(query)
        small = truncate(full[None, :], self.dimension, self.embedder.normalize)[0]
        funnel = rescore and self.dimension < full.shape[0]
        later_stage = funnel or self.reranker is not None
        n = candidates or self.candidates or (max(10 * k, 50) if later_stage else k)
        hits = self.store.search(small, max(n, k))
        results = [SearchResult.from_hit(h, "recall") for h in hits]
        if funnel and results:
            docs = self.embedder.embed_documents([r.text for r in results])
            scores = _cosine(docs, full)
            for r, s in zip(results, scores, strict=True):
                r.score = r.stage_scores["full"] = float(s)
            results.sort(key=lambda r: -r.score)
        if self.reranker is not None and results:
            scores = self.reranker.scores(query, [r.text for r in results])
            for r, s in zip(results, scores, strict=True):
                r.score = r.stage_scores["rerank"] = float(s)
            results.sort(key=lambda r: -r.score)
        return results[:k]


class ColbertRetriever:
    """Search a ColBERT collection by MaxSim (natively in Qdrant, per-token rows in Milvus)."""

    def __init__(self, store: VectorStore, engine: Any, *, reranker: Any | None = None) -> None:
        self.store = store
        self.engine = engine
        self.spec = _spec_of(store)
        if self.spec.layout != "multivector":
            raise InvalidInputError(f"collection {self.spec.name!r} holds single vectors; use Retriever")
        _check_model(self.spec, engine.model_identity, f"{store.name} at {store.location}")
        if reranker is not None and not isinstance(reranker, CrossEncoderReranker):
            reranker = CrossEncoderReranker(reranker)
        self.reranker = reranker

    def search(self, query: str, k: int = 10, *, candidates: int | None = None) -> list[SearchResult]:
        if k <= 0:
            raise InvalidInputError("k must be positive")
        tokens = self.engine.encode(
            query, pooling_task="token_embed", pooling_params=PoolingParams(input_type="query")
        )
        q = np.asarray(tokens[0].outputs.data, dtype=np.float32)
        n = candidates or (max(5 * k, 30) if self.reranker is not None else k)
        results = [SearchResult.from_hit(h, "maxsim") for h in self.store.search_multivector(q, max(n, k))]
        if self.reranker is not None and results:
            scores = self.reranker.scores(query, [r.text for r in results])
            for r, s in zip(results, scores, strict=True):
                r.score = r.stage_scores["rerank"] = float(s)
            results.sort(key=lambda r: -r.score)
        return results[:k]


def _cosine(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1) * max(float(np.linalg.norm(vector)), 1e-12)
    return (matrix @ vector) / np.maximum(norms, 1e-12)
