"""Two-stage dense retrieval (the Matryoshka funnel), plus an optional cross-encoder rerank.

Stage 1 recalls candidates with the small vectors stored in the database (cheap to store and to
search); stage 2 re-scores them with full-size vectors taken from the embedding cache, filled
when the chunks were ingested (a cache miss, e.g. on another machine, recomputes from the chunk
text in the payload); stage 3 optionally reranks the survivors with a cross-encoder.
"""

from __future__ import annotations

import logging

import numpy as np

from poolrag.backend import PoolingBackend
from poolrag.cache.embedder import CachedEmbedder
from poolrag.cache.matryoshka import truncate
from poolrag.errors import InvalidInputError
from poolrag.retrieval.collection_checks import check_k, check_model, existing_spec
from poolrag.retrieval.rerank import CrossEncoderReranker
from poolrag.retrieval.results import SearchResult
from poolrag.stores.base import VectorStore
from poolrag.stores.filters import MetadataFilter, check_filter

logger = logging.getLogger(__name__)


class Retriever:
    """Search one dense collection: small-vector recall → full-vector re-score → optional rerank.

    Args:
        store: the collection (its metadata says the stored size and the model).
        backend: the model the collection was ingested with; a :class:`CachedEmbedder` to reuse
            its cache for the full-size re-score, any other backend is wrapped in one without a cache.
        reranker: a cross-encoder backend or :class:`CrossEncoderReranker` for the last stage.
        candidates: how many hits stage 1 returns; default ``max(10 * k, 50)`` when a later stage
            re-scores them, else ``k``.
    """

    def __init__(
        self,
        store: VectorStore,
        backend: PoolingBackend,
        *,
        reranker: CrossEncoderReranker | PoolingBackend | None = None,
        candidates: int | None = None,
    ) -> None:
        self.store = store
        self.embedder = backend if isinstance(backend, CachedEmbedder) else CachedEmbedder(backend)
        self.spec = existing_spec(store)
        if self.spec.layout != "dense":
            raise InvalidInputError(
                f"collection {self.spec.name!r} holds ColBERT token vectors; use ColbertRetriever"
            )
        check_model(self.spec, self.embedder.model_identity, f"{store.name} at {store.location}")
        if reranker is not None and not isinstance(reranker, CrossEncoderReranker):
            reranker = CrossEncoderReranker(reranker)
        self.reranker = reranker
        self.candidates = candidates

    @property
    def dimension(self) -> int:
        return self.spec.dimension

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        filter: MetadataFilter | None = None,
        candidates: int | None = None,
        rescore: bool = True,
    ) -> list[SearchResult]:
        """The ``k`` best chunks for ``query`` among those whose payload matches ``filter``;
        ``rescore=False`` skips stage 2 (for comparison)."""
        check_k(k)
        checked = check_filter(filter)
        full = self.embedder.embed_query(query)
        small = truncate(full[None, :], self.dimension, self.embedder.normalize)[0]
        funnel = rescore and self.dimension < full.shape[0]
        later_stage = funnel or self.reranker is not None
        n = candidates or self.candidates or (max(10 * k, 50) if later_stage else k)
        hits = self.store.search(small, max(n, k), checked)
        results = [SearchResult.from_hit(h, "recall") for h in hits]
        if funnel and results:
            docs = self.embedder.embed_documents([r.text for r in results])
            scores = _cosine(docs, full)
            for r, s in zip(results, scores, strict=True):
                r.score = r.stage_scores["full"] = float(s)
            results.sort(key=lambda r: -r.score)
        if self.reranker is not None:
            results = self.reranker.rerank_results(query, results)
        return results[:k]


def _cosine(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1) * max(float(np.linalg.norm(vector)), 1e-12)
    return (matrix @ vector) / np.maximum(norms, 1e-12)
