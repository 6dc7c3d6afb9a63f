"""Two-stage dense retrieval (the Matryoshka funnel), sparse and hybrid search, plus an optional
cross-encoder rerank.

Stage 1 recalls candidates with the small vectors stored in the database (cheap to store and to
search); stage 2 re-scores them with full-size vectors taken from the embedding cache, filled
when the chunks were ingested (a cache miss, e.g. on another machine, recomputes from the chunk
text in the payload); stage 3 optionally reranks the survivors with a cross-encoder.

Sparse mode ranks by the collection's sparse field alone (no dense stage to re-score). Hybrid
mode fuses the dense and the sparse leg (by default their min-max normalised scores, the sparse
share adapted per query; see
:mod:`poolrag.stores.hybrid`) in the store when the stored vectors are full size; with smaller
stored vectors the funnel re-scores the dense leg first and the fusion happens here, by the stores'
rules, so the sparse evidence is not lost to a re-score that only knows dense similarity.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from poolrag.backend import PoolingBackend
from poolrag.cache.embedder import CachedEmbedder
from poolrag.counts import check_count
from poolrag.errors import InvalidInputError
from poolrag.pooling.matryoshka import truncate
from poolrag.retrieval.collection_checks import bm25_query_encoder, check_model, existing_spec
from poolrag.retrieval.rerank import CrossEncoderReranker
from poolrag.retrieval.rerank_language import default_rerank_weight, reranker_languages
from poolrag.retrieval.results import SearchResult
from poolrag.retrieval.sparse_queries import SEARCH_MODES, NoQueryTermsError, SearchMode, SparseQueryEncoder
from poolrag.sparse.vector import SparseVector
from poolrag.stores.base import HybridFusion, StoreHit, VectorStore
from poolrag.stores.errors import UnsupportedStoreFeature
from poolrag.stores.filters import CheckedFilter, MetadataFilter, check_filter
from poolrag.stores.hybrid import DEFAULT_FUSION, check_fusion, fuse_legs, prefetch_depth
from poolrag.stores.language_prior import collection_default_fusion
from poolrag.stores.retrieval_record import RetrievalRecord, saved_record
from poolrag.text_validity import check_text, text_problem

logger = logging.getLogger(__name__)


def default_candidates(k: int) -> int:
    """Stage-1 candidates for ``k`` results when a later stage re-orders them (the full-vector re-score,
    a rerank): ``max(10 * k, 50)``, deep enough for that stage to lift a hit the first one ranked low.
    ``poolrag search``'s default, and the pool ``poolrag eval``'s reranked modes rerank, so that eval
    measures the second stage search runs."""
    return max(10 * k, 50)


class Retriever:
    """Search one dense collection: small-vector recall → full-vector re-score → optional rerank.

    Args:
        store: the collection (its metadata says the stored size and the model).
        backend: the model the collection was ingested with; a :class:`CachedEmbedder` to reuse
            its cache for the full-size re-score, any other backend is wrapped in one without a cache.
        reranker: a cross-encoder backend or :class:`CrossEncoderReranker` for the last stage (a bare
            backend fuses with the share the collection's saved record holds, else with a smaller
            share where its card's languages do not cover the collection's recorded one:
            :func:`~poolrag.retrieval.rerank_language.default_rerank_weight`).
        candidates: how many hits stage 1 returns; default :func:`default_candidates` (``max(10 * k,
            50)``) when a later stage re-scores them, else ``k``.
        sparse_encoder: turns queries into sparse vectors for ``mode="sparse"`` / ``"hybrid"``
            (e.g. :class:`~poolrag.sparse.BM25Encoder` for a ``bm25`` collection; its unit query weights
            are right, since every store supplies IDF). A ``bm25`` collection whose terms are words
            needs none: its recorded analyzer is used; one with another analyzer is refused.
    """

    def __init__(
        self,
        store: VectorStore,
        backend: PoolingBackend,
        *,
        reranker: CrossEncoderReranker | PoolingBackend | None = None,
        candidates: int | None = None,
        sparse_encoder: SparseQueryEncoder | None = None,
    ) -> None:
        if sparse_encoder is not None and not isinstance(sparse_encoder, SparseQueryEncoder):
            raise InvalidInputError(
                f"sparse_encoder must have encode_queries(texts), got {type(sparse_encoder).__name__}"
            )
        self.store = store
        self.embedder = backend if isinstance(backend, CachedEmbedder) else CachedEmbedder(backend)
        self.spec = existing_spec(store)
        self.sparse_encoder: SparseQueryEncoder | None = bm25_query_encoder(self.spec, sparse_encoder)  # type: ignore[assignment]
        if self.spec.layout != "dense":
            raise InvalidInputError(
                f"collection {self.spec.name!r} holds ColBERT token vectors; use ColbertRetriever"
            )
        check_model(self.spec, self.embedder.facts, f"{store.name} at {store.location}")
        if reranker is not None and not isinstance(reranker, CrossEncoderReranker):
            reranker = CrossEncoderReranker(reranker, weight=None)
        if reranker is not None and reranker.weight is None:
            # A bare cross-encoder, or one whose share was left open, takes the share ``poolrag eval
            # --tune --rerank --save`` chose, if any, else the collection's default for its languages;
            # a CrossEncoderReranker given a weight keeps its own.
            record = saved_record(self.spec)
            tuned = None if record is None else record.rerank_weight
            languages = reranker_languages(reranker.backend)
            share = default_rerank_weight(self.spec, languages) if tuned is None else tuned
            reranker = reranker.with_weight(share)
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
        mode: SearchMode = "dense",
        filter: MetadataFilter | None = None,
        candidates: int | None = None,
        rescore: bool = True,
        fusion: HybridFusion | None = None,
        prefetch: int | None = None,
        query_vector: np.ndarray | Sequence[float] | None = None,
    ) -> list[SearchResult]:
        """The ``k`` best chunks for ``query`` among those whose payload matches ``filter``.

        ``mode``: ``dense`` (the funnel), ``sparse`` (the sparse field alone) or ``hybrid`` (both,
        fused by ``fusion``: ``("adaptive", w)`` (default w = 0.4), ``("minmax", w)``, ``"dbsf"``,
        ``"rrf"`` or ``("weighted", w)``, ``w`` being the sparse leg's share; see
        :mod:`poolrag.stores.hybrid`); ``prefetch``: how deep each hybrid leg goes (default: as many
        as the hits fused, at least 50). Without ``fusion``, a hybrid search fuses as the collection's
        saved record says (``poolrag eval --tune --save``), legs as deep as it was tuned with unless
        ``prefetch`` is given; with no record, by the collection's default (BM25 leads where the
        model does not cover the collection's recorded language). ``rescore=False`` skips stage 2 (for
        comparison); a late-chunked collection has no stage 2 (a chunk's full-size late vector needs
        its whole document), so its small vectors' scores are final.

        ``query_vector``: the query's embedding when the caller made it already (LlamaIndex's
        ``QueryBundle.embedding``, a HyDE average); the dense leg uses it instead of embedding
        ``query``, which still drives the sparse leg and the rerank. Of the model's output size (then
        re-scored as usual) or the collection's (then its recall scores are final).
        """
        check_text(query, "query")  # named as the query in every mode, not as the engine's input
        check_count(k, "k")
        if mode not in SEARCH_MODES:
            raise InvalidInputError(f"mode must be one of {', '.join(SEARCH_MODES)}, got {mode!r}")
        checked = check_filter(filter)
        if mode == "sparse":
            n = candidates or self.candidates or (default_candidates(k) if self.reranker is not None else k)
            sparse_query = self._sparse_query(query)
            if not sparse_query.indices.size:  # else "no results", as if the collection were empty
                raise NoQueryTermsError(
                    "the query has no terms the collection's sparse encoder keeps (only stop words, "
                    "punctuation or pieces it drops); search it with the dense or hybrid mode"
                )
            hits = self.store.search_sparse(sparse_query, max(n, k), checked)
            results = [SearchResult.from_hit(h, "sparse") for h in hits]
        else:
            tuned_depth = None
            if mode == "hybrid" and fusion is None:
                fusion, tuned_depth = self._saved_setting()
            fusion = check_fusion(DEFAULT_FUSION if fusion is None else fusion)  # before any model runs
            sparse = self._sparse_query(query) if mode == "hybrid" else None
            full = self.embedder.embed_query(query) if query_vector is None else self._given(query_vector)
            small = truncate(full[None, :], self.dimension, self.embedder.normalize)[0]
            # a late vector read its whole document: the chunk's text alone cannot give it full size
            funnel = rescore and self.dimension < full.shape[0] and self.spec.chunk_vectors == "per_chunk"
            later_stage = funnel or self.reranker is not None
            n = candidates or self.candidates or (default_candidates(k) if later_stage else k)
            wanted = max(k, n) if self.reranker is not None else k
            if sparse is None:
                hits = self.store.search(small, max(n, k), checked)
                results = self._rescored(full, [SearchResult.from_hit(h, "recall") for h in hits], funnel)
            elif funnel:
                depth = self._depth(wanted, prefetch, tuned_depth)
                recall = max(n, depth)
                results = self._hybrid_funnel(full, small, sparse, wanted, recall, depth, checked, fusion)
            else:
                depth = self._depth(wanted, prefetch, tuned_depth)
                hits = self.store.search_hybrid(
                    small, sparse, wanted, filter=checked, fusion=fusion, prefetch=depth
                )
                results = [SearchResult.from_hit(h, "hybrid") for h in hits]
        if self.reranker is not None:
            results = self.reranker.rerank_results(query, results)
        return results[:k]

    async def asearch(self, query: str, k: int = 10, **options: Any) -> list[SearchResult]:
        """:meth:`search` for asyncio, in a worker thread: the store clients block, and the query's
        model calls still batch with the engine's other callers from there."""
        return await asyncio.to_thread(self.search, query, k, **options)

    @property
    def saved(self) -> RetrievalRecord | None:
        """The collection's saved retrieval record (checked on every read: a bad one is refused)."""
        return saved_record(self.spec)

    def _saved_setting(self) -> tuple[HybridFusion, int | None]:
        """The saved fusion and leg depth, or the collection's default fusion when nothing was saved
        (:func:`~poolrag.stores.language_prior.collection_default_fusion`)."""
        record = self.saved
        if record is None:
            return collection_default_fusion(self.spec), None
        return record.fusion, record.prefetch

    @staticmethod
    def _depth(wanted: int, prefetch: int | None, tuned: int | None) -> int:
        """Each hybrid leg's depth: the caller's, else the tuned one (never shallower than the hits
        fused, so a search asking for more than was tuned still gets them), else ``wanted``."""
        if prefetch is None and tuned is not None:
            return max(tuned, wanted)
        return prefetch_depth(wanted, prefetch)

    def _given(self, query_vector: object) -> np.ndarray:
        """A caller's query embedding, checked: one finite vector of the model's output size or the
        collection's stored size (a wrong one would search nonsense, or fail deep in a store)."""
        try:
            vector = np.asarray(query_vector, dtype=np.float32)
        except (TypeError, ValueError):
            vector = np.empty((0, 0), dtype=np.float32)
        facts = self.embedder.facts
        sizes = sorted({self.dimension, int(facts.default_dimensions or facts.embedding_dim or 0)} - {0})
        if vector.ndim != 1 or vector.shape[0] not in sizes or not np.isfinite(vector).all():
            raise InvalidInputError(
                f"query_vector must be one finite vector of {' or '.join(map(str, sizes))} values "
                f"(the model's output or the collection's size), got shape {vector.shape}"
            )
        return vector

    def _sparse_query(self, query: str) -> SparseVector:
        if self.spec.sparse is None:
            raise UnsupportedStoreFeature(
                f"collection {self.spec.name!r} has no sparse field; sparse and hybrid search need a "
                "collection ingested with sparse vectors: 'poolrag ingest --hybrid' into a new "
                "--collection (IngestPipeline(..., sparse_encoder=...) in Python), since a dense one "
                "cannot gain the field"
            )
        if self.sparse_encoder is None:
            raise InvalidInputError("sparse and hybrid search need a sparse_encoder (e.g. a BM25Encoder)")
        (vector,) = self.sparse_encoder.encode_queries([query])
        return vector

    def _rescored(self, full: np.ndarray, results: list[SearchResult], funnel: bool) -> list[SearchResult]:
        """Stage 2: full-size cosine from the cache replaces the small-vector score. A point without
        stored text (one a framework's vector store added, which keeps its text elsewhere) has no
        full vector to compute, so it keeps its recall score rather than failing the whole search;
        so does one whose text the model refuses (text_validity's rule, not strip(): zero-width
        characters only, a lone surrogate failed every search as 'input[0] is empty')."""
        with_text = [r for r in results if text_problem(r.text) is None] if funnel else []
        if with_text:
            docs = self.embedder.embed_documents([r.text for r in with_text])
            scores = _cosine(docs, full)
            for r, s in zip(with_text, scores, strict=True):
                r.score = r.stage_scores["full"] = float(s)
            results.sort(key=lambda r: -r.score)
        return results

    def _hybrid_funnel(
        self,
        full: np.ndarray,
        small: np.ndarray,
        sparse: SparseVector,
        wanted: int,
        recall: int,
        depth: int,
        checked: CheckedFilter | None,
        fusion: HybridFusion,
    ) -> list[SearchResult]:
        """The dense leg (``recall`` small-vector hits re-scored with full vectors, best ``depth``
        kept) fused with the ``depth``-deep sparse leg by the stores' rules."""
        dense_hits = self.store.search(small, recall, checked)
        dense = self._rescored(full, [SearchResult.from_hit(h, "recall") for h in dense_hits], True)[:depth]
        sparse_hits: list[StoreHit] = self.store.search_sparse(sparse, depth, checked) if len(sparse) else []
        by_id = {r.id: r for r in dense}
        for hit in sparse_hits:
            result = SearchResult.from_hit(hit, "sparse")
            if result.id in by_id:
                by_id[result.id].stage_scores["sparse"] = hit.score
            else:
                by_id[result.id] = result
        dense_leg = [StoreHit(r.id, r.score, {}) for r in dense]
        results = []
        for hit in fuse_legs(dense_leg, sparse_hits, wanted, fusion):
            result = by_id[hit.id]
            result.score = result.stage_scores["hybrid"] = hit.score
            results.append(result)
        return results


def _cosine(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1) * max(float(np.linalg.norm(vector)), 1e-12)
    return (matrix @ vector) / np.maximum(norms, 1e-12)
