"""ColBERT retrieval over any store: add texts, search by MaxSim, delete; sync and async.

This is the one ColBERT stack: the LangChain and LlamaIndex retrievers wrap it, ``poolrag search``
uses it on collections ``poolrag ingest`` filled, and the store decides how MaxSim runs (natively
in Qdrant, per-token rows plus exact re-scoring in Milvus, numpy in :class:`InMemoryStore`).
Documents are encoded as documents and queries as queries (ColBERT marks and pads them
differently), each list in one backend call so the backend batches it by tokens.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from poolrag.backend import PoolingBackend
from poolrag.counts import check_count
from poolrag.errors import InvalidInputError
from poolrag.model_facts import ScoreKind
from poolrag.params import PoolingParams
from poolrag.retrieval.collection_checks import check_model
from poolrag.retrieval.rerank import CrossEncoderReranker
from poolrag.retrieval.results import DOC_ID_KEY, SearchResult
from poolrag.stores.base import ChunkRecord, CollectionSpec, VectorStore
from poolrag.stores.filters import CheckedFilter, MetadataFilter, check_filter
from poolrag.text_validity import check_text

logger = logging.getLogger(__name__)

TOKEN_TASK = "token_embed"
#: Namespace of the store ids derived from caller ids and of content-addressed ids.
ID_NAMESPACE = uuid.UUID("3d6f1c0e-8a47-5b2e-9c61-7e0f4a2b8d15")
_RESERVED = frozenset({"text", DOC_ID_KEY})


def store_id(doc_id: str) -> str:
    """The id a store keeps for ``doc_id``: the id itself when it is a UUID, else a stable UUIDv5
    of it (Qdrant takes only UUIDs or integers as point ids, Milvus bounded strings)."""
    try:
        return str(uuid.UUID(doc_id))
    except ValueError:
        return str(uuid.uuid5(ID_NAMESPACE, doc_id))


def content_id(text: str, metadata: Mapping[str, Any]) -> str:
    """A text's id when the caller gives none: the same text with the same metadata gets the same
    id on every call and in every process, so adding it again replaces it instead of duplicating it."""
    key = json.dumps([text, dict(metadata)], sort_keys=True, default=str, ensure_ascii=False)
    return str(uuid.uuid5(ID_NAMESPACE, key))


class ColbertRetriever:
    """Add texts to, search and delete from one ColBERT (multivector) collection.

    Args:
        store: the collection; created from the backend's facts on the first :meth:`add_texts` when
            it does not exist yet, else checked against the backend's model.
        backend: an engine or client running a late-interaction (MaxSim) model.
        reranker: an optional cross-encoder stage after MaxSim.
        truncate_prompt_tokens: passed to the engine; a ColBERT model cuts queries at its query
            length and documents at its document length either way, as PyLate does, so ``None``
            refuses nothing a ColBERT model reads.

    Results carry the caller's id in :attr:`SearchResult.id` and the caller's metadata in
    :attr:`SearchResult.metadata` (the whole stored payload stays in ``payload``).
    """

    def __init__(
        self,
        store: VectorStore,
        backend: PoolingBackend,
        *,
        reranker: CrossEncoderReranker | PoolingBackend | None = None,
        truncate_prompt_tokens: int | None = -1,
    ) -> None:
        facts = backend.facts
        if facts.score_kind is not ScoreKind.MAXSIM:
            raise InvalidInputError(
                f"{facts.model_name} is not a ColBERT (late-interaction) model; ColbertRetriever needs one"
            )
        self.store = store
        self.backend = backend
        self.truncate_prompt_tokens = truncate_prompt_tokens
        if reranker is not None and not isinstance(reranker, CrossEncoderReranker):
            reranker = CrossEncoderReranker(reranker)
        self.reranker = reranker
        self.spec: CollectionSpec | None = None
        self._current_spec()  # an existing collection is checked now, before any write or search

    def __repr__(self) -> str:
        where = f"{self.store.name}:{self.store.collection}"
        return f"ColbertRetriever({self.backend.facts.model_name!r}, {where})"

    def _current_spec(self) -> CollectionSpec | None:
        # Another writer (an ingest run, another retriever) may have created it since; kept only once
        # checked, so a refused collection is refused again on the next call
        if self.spec is None and (spec := self.store.read_spec()) is not None:
            if spec.layout != "multivector":
                raise InvalidInputError(f"collection {spec.name!r} holds single vectors; use Retriever")
            check_model(spec, self.backend.facts, f"{self.store.name} at {self.store.location}")
            self.spec = spec
        return self.spec

    def _params(self, input_type: str) -> PoolingParams:
        return PoolingParams.cut_at(self.truncate_prompt_tokens, input_type=input_type)

    # -- writes -------------------------------------------------------------------------------------
    def add_texts(
        self,
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any] | None] | None = None,
        ids: Sequence[str | None] | None = None,
    ) -> list[str]:
        """Encode ``texts`` as documents and store them with their metadata; returns their ids
        (the given ones, else content-addressed). Adding an id again replaces that text."""
        texts, metadatas, ids = _columns(texts, metadatas, ids)
        if not texts:
            return []
        rows = _once_each(texts, metadatas, ids)
        vectors = self.backend.encode_arrays(rows[0], TOKEN_TASK, self._params("document"))
        self._write(*rows, vectors)
        return ids

    async def aadd_texts(
        self,
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any] | None] | None = None,
        ids: Sequence[str | None] | None = None,
    ) -> list[str]:
        """:meth:`add_texts` for asyncio: the encoding joins the backend's batches, the write runs
        in a worker thread."""
        texts, metadatas, ids = _columns(texts, metadatas, ids)
        if not texts:
            return []
        rows = _once_each(texts, metadatas, ids)
        vectors = await self.backend.aencode_arrays(rows[0], TOKEN_TASK, self._params("document"))
        await asyncio.to_thread(self._write, *rows, vectors)
        return ids

    def _write(
        self,
        texts: list[str],
        metadatas: list[dict[str, Any]],
        ids: list[str],
        vectors: Sequence[np.ndarray],
    ) -> None:
        if self._current_spec() is None:
            facts = self.backend.facts
            dimension = int(np.shape(vectors[0])[-1])
            self.spec = self.store.ensure_collection(
                CollectionSpec(
                    name=self.store.collection,
                    dimension=dimension,
                    model_identity=facts.model_identity,
                    full_dimension=dimension,
                    model_name=facts.model_name,
                    layout="multivector",
                    model_outputs=facts.output_fingerprint,
                )
            )
        records = {
            store_id(doc_id): ChunkRecord(
                store_id(doc_id),
                np.asarray(vector, dtype=np.float32),
                {**metadata, "text": text, DOC_ID_KEY: doc_id},
            )
            for doc_id, text, metadata, vector in zip(ids, texts, metadatas, vectors, strict=True)
        }
        self.store.upsert(list(records.values()))

    def delete(self, ids: Sequence[str]) -> None:
        """Remove texts by the ids :meth:`add_texts` returned; unknown ids are ignored."""
        if isinstance(ids, str):
            raise InvalidInputError("delete takes a list of ids, not one string")
        if ids and self._current_spec() is not None:
            self.store.delete([store_id(str(i)) for i in ids])

    def count(self) -> int:
        """Number of texts in the collection (0 before the first add)."""
        return self.store.count() if self._current_spec() is not None else 0

    # -- reads --------------------------------------------------------------------------------------
    def search(
        self, query: str, k: int = 10, *, filter: MetadataFilter | None = None, candidates: int | None = None
    ) -> list[SearchResult]:
        """The ``k`` best texts for ``query`` by MaxSim among those whose metadata matches
        ``filter`` (then reranked, when a reranker is set, among ``candidates`` of them)."""
        checked = _checked_query(query, k, filter)
        if self._current_spec() is None:
            return []
        query_vectors = self.backend.encode_arrays([query], TOKEN_TASK, self._params("query"))[0]
        return self._ranked(query, query_vectors, k, checked, candidates)

    async def asearch(
        self, query: str, k: int = 10, *, filter: MetadataFilter | None = None, candidates: int | None = None
    ) -> list[SearchResult]:
        """:meth:`search` for asyncio (the store and the reranker run in a worker thread)."""
        checked = _checked_query(query, k, filter)
        if await asyncio.to_thread(self._current_spec) is None:
            return []
        query_vectors = (await self.backend.aencode_arrays([query], TOKEN_TASK, self._params("query")))[0]
        return await asyncio.to_thread(self._ranked, query, query_vectors, k, checked, candidates)

    def _ranked(
        self,
        query: str,
        query_vectors: np.ndarray,
        k: int,
        filter: MetadataFilter | None,
        candidates: int | None,
    ) -> list[SearchResult]:
        """The store's MaxSim hits for the encoded query, reranked when a reranker is set; blocking
        (the store and the reranker), so :meth:`asearch` runs it in a worker thread."""
        n = candidates or (max(5 * k, 30) if self.reranker is not None else k)
        found = self.store.search_multivector(np.asarray(query_vectors, dtype=np.float32), max(n, k), filter)
        hits = [SearchResult.from_hit(h, "maxsim") for h in found]
        if self.reranker is not None:
            hits = self.reranker.rerank_results(query, hits)
        return hits[:k]


def _checked_query(query: object, k: int, filter: MetadataFilter | None) -> CheckedFilter | None:
    """A search's arguments checked before any model call: the query named as such (not as the
    engine's ``input[0]``), ``k`` and the filter's shape."""
    check_text(query, "query")
    check_count(k, "k")
    return check_filter(filter)


def _once_each(
    texts: list[str], metadatas: list[dict[str, Any]], ids: list[str]
) -> tuple[list[str], list[dict[str, Any]], list[str]]:
    """The rows of distinct ids (a repeated content id is the same text and metadata): encoded
    once, and written once, since a store may refuse one write that names an id twice (Milvus)."""
    first: dict[str, int] = {}  # each id's first row, in order of appearance
    for row, cid in enumerate(ids):
        first.setdefault(cid, row)
    if len(first) == len(ids):
        return texts, metadatas, ids
    rows = list(first.values())
    return [texts[i] for i in rows], [metadatas[i] for i in rows], list(first)


def _columns(
    texts: Sequence[str],
    metadatas: Sequence[Mapping[str, Any] | None] | None,
    ids: Sequence[str | None] | None,
) -> tuple[list[str], list[dict[str, Any]], list[str]]:
    """The three columns of one add, checked: equal lengths, string texts, unique given ids, and
    metadata that does not overwrite the payload's own fields. A text without an id (``ids`` absent,
    or ``None`` in it) gets its content id, so the same text and metadata twice is one document."""
    if isinstance(texts, str):
        raise InvalidInputError("add_texts takes a list of texts, not one string")
    texts = list(texts)
    if not all(isinstance(t, str) for t in texts):
        raise InvalidInputError("every text must be a string")
    metas = [dict(m or {}) for m in metadatas] if metadatas is not None else [{} for _ in texts]
    if len(metas) != len(texts) or (ids is not None and len(ids) != len(texts)):
        raise InvalidInputError(
            "texts, metadatas and ids must have equal lengths, got "
            f"{len(texts)}, {len(metas)}, {len(texts) if ids is None else len(ids)}"
        )
    for meta in metas:
        clash = _RESERVED & set(meta)
        if clash:
            raise InvalidInputError(
                f"metadata keys {sorted(clash)} are the payload's own fields; rename them"
            )
    given = [None if i is None else str(i) for i in ids] if ids is not None else [None] * len(texts)
    named = [i for i in given if i is not None]
    if any(not i for i in named):
        raise InvalidInputError("ids must be non-empty strings")
    if len(set(named)) != len(named):
        raise InvalidInputError("ids must be unique within one call")
    return texts, metas, [i or content_id(t, m) for i, t, m in zip(given, texts, metas, strict=True)]
