"""The sparse vectors behind both frameworks' hybrid-search hooks, from either sparse source.

LangChain's Qdrant and Milvus stores and LlamaIndex's Qdrant store each take a sparse encoder in
their own shape (a ``SparseVector`` model, a ``dict``, a pair of index and value lists); the
vectors themselves are made here once, so every shape carries the same numbers as the core's:

* ``bm25``: lexical BM25 over a model's tokenizer (:class:`~poolrag.sparse.BM25Encoder`), hybrid
  search with no second model. Documents get BM25's term-frequency half, normalised by an average
  length pinned on the first batch (as ``poolrag ingest`` pins it), so a document always gets the
  same vector. Queries get unit weights when the store applies IDF itself (Qdrant ``Modifier.IDF``)
  or, with ``query_idf="documents"``, IDF from the documents this object has encoded (Milvus,
  whose sparse field has no IDF modifier);
* ``model``: a learned sparse model (SPLADE, BGE-M3's sparse head) on any
  :class:`~poolrag.backend.PoolingBackend`, through its ``sparse_embed`` task.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Literal, Protocol

import numpy as np
from pydantic import AfterValidator

from poolrag.backend import PoolingBackend
from poolrag.errors import InvalidInputError
from poolrag.frameworks.adapter_calls import require_list
from poolrag.params import PoolingParams
from poolrag.sparse.bm25 import BM25Encoder, BM25Stats
from poolrag.sparse.vector import SparseVector
from poolrag.stores.milvus_sparse_rows import milvus_sparse_row
from poolrag.text_validity import check_texts

logger = logging.getLogger(__name__)

SPARSE_TASK = "sparse_embed"


class SparseSource(StrEnum):
    BM25 = "bm25"
    MODEL = "model"


class QueryIdf(StrEnum):
    """Where BM25's IDF comes from at query time."""

    STORE = "store"  # unit query weights; the store multiplies by IDF (Qdrant Modifier.IDF)
    DOCUMENTS = "documents"  # IDF from the documents this encoder has seen (stores without a modifier)


#: ``source=`` and ``query_idf=`` as the docs write them (``"bm25"``) or as members; kept as members.
SparseSourceName = Annotated[SparseSource | Literal["bm25", "model"], AfterValidator(SparseSource)]
QueryIdfName = Annotated[QueryIdf | Literal["store", "documents"], AfterValidator(QueryIdf)]


class SparseTextEncoder(Protocol):
    """Documents and queries to sparse vectors, sync and async."""

    def documents(self, texts: object) -> list[SparseVector]: ...

    def queries(self, texts: object) -> list[SparseVector]: ...

    async def adocuments(self, texts: object) -> list[SparseVector]: ...

    async def aqueries(self, texts: object) -> list[SparseVector]: ...


class LexicalSparseEncoder:
    """BM25 document and query vectors over one tokenizer.

    Args:
        encoder: the BM25 encoder (tokenizer, ``k1``, ``b``).
        avg_doc_length: the corpus' mean length in terms; ``None`` pins the mean of the first batch
            of documents (at least 1), so that later batches are normalised alike.
        query_idf: ``store`` or ``documents`` (see :class:`QueryIdf`).
    """

    def __init__(
        self,
        encoder: BM25Encoder,
        avg_doc_length: float | None = None,
        query_idf: QueryIdf | str = QueryIdf.STORE,
    ) -> None:
        if avg_doc_length is not None and not avg_doc_length > 0:
            raise InvalidInputError(f"the average document length must be positive: {avg_doc_length}")
        self.encoder = encoder
        self.avg_doc_length = avg_doc_length
        self.query_idf = QueryIdf(query_idf)
        self.stats = BM25Stats()
        self._warned = False

    def documents(self, texts: object) -> list[SparseVector]:
        # refused as the engine refuses it: an empty document would also lower the pinned length
        counts = self.encoder.term_counts(check_texts(require_list(texts), "texts"))
        if not counts:
            return []
        if self.avg_doc_length is None:
            lengths = [sum(c.values()) for c in counts]
            self.avg_doc_length = max(sum(lengths) / len(lengths), 1.0)
            logger.info("BM25 average document length pinned at %.2f terms", self.avg_doc_length)
        if self.query_idf is QueryIdf.DOCUMENTS:
            self.stats = self.stats.merged(BM25Stats.from_term_counts(counts))
        return self.encoder.document_vectors(counts, self.avg_doc_length)

    def queries(self, texts: object) -> list[SparseVector]:
        stats = self.stats if self.query_idf is QueryIdf.DOCUMENTS else None  # None: unit weights
        if stats is not None and stats.document_count == 0 and not self._warned:
            self._warned = True  # the usual ingest-once, query-later split: say it once
            logger.warning(
                "BM25 query_idf='documents', but this encoder has encoded no documents (a process "
                "other than the ingest's?): every query term weighs the same. Encode the corpus "
                "with this object first (its document statistics are kept in memory only)"
            )
        return self.encoder.encode_queries(check_texts(require_list(texts), "queries"), stats)

    # Tokenising is fast and holds no lock worth yielding for.
    async def adocuments(self, texts: object) -> list[SparseVector]:
        return self.documents(texts)

    async def aqueries(self, texts: object) -> list[SparseVector]:
        return self.queries(texts)


def _from_records(records: list[np.ndarray]) -> list[SparseVector]:
    return [SparseVector(entries["index"], entries["value"]) for entries in records]


class LearnedSparseEncoder:
    """A sparse model's vectors (SPLADE, BGE-M3), with its document and query prompts if it has any."""

    def __init__(self, backend: PoolingBackend, document_params: PoolingParams, query_params: PoolingParams):
        # At construction, so that a dense model passed by mistake fails here and not at ingest.
        document_params.verify(SPARSE_TASK, backend.facts)
        self.backend = backend
        self.document_params = document_params
        self.query_params = query_params

    def documents(self, texts: object) -> list[SparseVector]:
        return self._encode(texts, self.document_params)

    def queries(self, texts: object) -> list[SparseVector]:
        return self._encode(texts, self.query_params)

    def _encode(self, texts: object, params: PoolingParams) -> list[SparseVector]:
        return _from_records(self.backend.encode_arrays(require_list(texts), SPARSE_TASK, params))

    async def adocuments(self, texts: object) -> list[SparseVector]:
        return await self._aencode(texts, self.document_params)

    async def aqueries(self, texts: object) -> list[SparseVector]:
        return await self._aencode(texts, self.query_params)

    async def _aencode(self, texts: object, params: PoolingParams) -> list[SparseVector]:
        return _from_records(await self.backend.aencode_arrays(require_list(texts), SPARSE_TASK, params))


def as_index_lists(vectors: Sequence[SparseVector]) -> tuple[list[list[int]], list[list[float]]]:
    """Indices and values as two lists of lists: LlamaIndex's Qdrant ``sparse_*_fn`` shape."""
    return [v.indices.tolist() for v in vectors], [v.values.tolist() for v in vectors]


def as_milvus_rows(vectors: Sequence[SparseVector]) -> list[dict[int, float]]:
    """Document vectors as Milvus stores them: a text without terms (only punctuation for BM25, every
    weight zero for a learned model) gets the marker row poolrag's own Milvus store writes, since
    Milvus refuses an empty row and the whole insert with it. Queries stay plain dicts: an empty
    query is accepted and finds nothing."""
    return [milvus_sparse_row(v) for v in vectors]
