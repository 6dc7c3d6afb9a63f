"""What every vector store offers the ingestion pipeline and the retrievers.

A store object is bound to one collection. Collections carry poolrag's own metadata (model
identity, vector size, layout) so that a later run with another model or size is refused instead
of silently mixing incomparable vectors.
"""

from __future__ import annotations

import functools
import json
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol, Self

import numpy as np

from poolrag.config.packaged_models import packaged_hub_id, typed_identity
from poolrag.errors import InvalidInputError
from poolrag.model_facts import same_weights
from poolrag.printable import printable
from poolrag.sparse.vector import SparseVector
from poolrag.stores.errors import CollectionMismatchError
from poolrag.stores.filters import MetadataFilter
from poolrag.stores.vector_types import StoredVectors, VectorType, check_vector_type, checked_ranges

Layout = Literal["dense", "multivector"]
Quantization = Literal["int8", "binary"]
SparseKind = Literal["bm25", "learned"]
#: How each chunk's vector was made: the chunk embedded alone, or pooled from one pass over its whole
#: document (late chunking). The two are not comparable, so a collection holds one kind.
ChunkVectors = Literal["per_chunk", "late"]
CHUNK_VECTORS: tuple[str, ...] = ("per_chunk", "late")
#: How a hybrid search fuses its dense and sparse legs (rules in :mod:`poolrag.stores.hybrid`):
#: ``("minmax", w)`` per-query min-max normalised scores mixed ``(1 - w) * dense + w * sparse``,
#: ``("adaptive", w)`` the same with the sparse share moved per query from ``w`` towards the leg whose
#: best hit stands out more (the default, w = 0.4), ``"dbsf"`` (Qdrant's distribution-based score
#: fusion), ``"rrf"``, or ``("weighted", w)`` for RRF with weights ``2 * (1 - w)`` and ``2 * w``.
HybridFusion = Literal["rrf", "dbsf"] | tuple[Literal["weighted", "minmax", "adaptive"], float]
SPARSE_KINDS: tuple[str, ...] = ("bm25", "learned")
METADATA_KEY = "poolrag"


_CHUNK_VECTORS_SAID = {
    "per_chunk": "chunks embedded one by one",
    "late": "late-chunked vectors (--late-chunking)",
}


@dataclass(frozen=True)
class CollectionSpec:
    """How a collection is laid out and which model filled it.

    Attributes:
        dimension: size of the stored vectors (a Matryoshka size, or the model's full size).
        full_dimension: the model's full size; the funnel re-scores with it.
        layout: one vector per chunk (``dense``) or one per token (``multivector``, ColBERT).
        quantization: ``int8`` / ``binary`` index compression where the store supports it.
        model_options: how to load the model again for search (e.g. ``is_matryoshka`` override).
        sparse: a sparse field next to the dense one, for sparse and hybrid search. ``bm25``: the
            documents hold BM25's term-frequency half and the store supplies IDF at query time
            (Qdrant ``Modifier.IDF``; Milvus from statistics it keeps), so queries carry unit
            weights; ``learned``: model weights (SPLADE, BGE-M3) searched by plain inner product.
            ``None`` (every collection written before sparse support): dense only.
        multivector_dimension: a ColBERT token-vector field next to the dense one (BGE-M3's third
            head), searched with ``search_multivector``; Qdrant, Qdrant Edge and memory only.
        retrieval: the hybrid setting ``poolrag eval --tune --save`` chose, as stored; read it through
            :func:`poolrag.stores.retrieval_record.saved_record`, which checks every field.
        chunk_vectors: ``per_chunk`` (each chunk embedded alone; every collection written before
            late chunking) or ``late`` (pooled from one pass over the chunk's document).
        vector_type: what each dense vector is stored as: ``float32``, ``float16`` or ``uint8``
            (:mod:`poolrag.stores.vector_types`); dense-layout collections without a token field only.
        vector_ranges: uint8's fixed scale, ``[minima, maxima]`` per dimension, recorded so every later
            write and query buckets the same way.
        model_outputs: the model's output fingerprint (:attr:`ModelFacts.output_fingerprint`: pooling,
            normalisation, tokenizer): the same weights pooled otherwise make other vectors.
            ``None`` for collections written before it was recorded, which are not checked for it.
    """

    name: str
    dimension: int
    model_identity: str
    full_dimension: int
    model_name: str = ""
    layout: Layout = "dense"
    metric: str = "cosine"
    quantization: Quantization | None = None
    model_options: dict[str, Any] = field(default_factory=dict)
    sparse: SparseKind | None = None
    multivector_dimension: int | None = None
    retrieval: dict[str, Any] | None = None
    chunk_vectors: ChunkVectors = "per_chunk"
    vector_type: VectorType = "float32"
    vector_ranges: list[list[float]] | None = None
    model_outputs: str | None = None

    def __post_init__(self) -> None:
        self._check_vector_type()
        if self.chunk_vectors not in CHUNK_VECTORS:
            raise InvalidInputError(
                f"chunk_vectors must be one of {', '.join(CHUNK_VECTORS)}, got {self.chunk_vectors!r}"
            )
        if self.sparse is not None and self.sparse not in SPARSE_KINDS:
            raise InvalidInputError(
                f"sparse must be one of {', '.join(SPARSE_KINDS)} or None, got {self.sparse!r}"
            )
        if self.sparse is not None and self.layout != "dense":
            raise InvalidInputError(
                "a sparse field goes with the dense layout only (not with ColBERT token vectors)"
            )
        if self.multivector_dimension is not None and (
            self.layout != "dense"
            or isinstance(self.multivector_dimension, bool)
            or not isinstance(self.multivector_dimension, int)
            or self.multivector_dimension < 1
        ):
            raise InvalidInputError(
                "multivector_dimension is the size of a token-vector field next to the dense one: a "
                f"positive integer in a dense-layout collection, got {self.multivector_dimension!r}"
            )

    def _check_vector_type(self) -> None:
        check_vector_type(self.vector_type)
        if self.vector_type != "float32" and (self.layout != "dense" or self.multivector_dimension):
            raise InvalidInputError(
                f"{self.vector_type} vectors are for dense collections (ColBERT token vectors stay float32)"
            )
        if self.vector_type == "uint8":
            checked_ranges(self.vector_ranges, self.dimension)
        elif self.vector_ranges is not None:
            raise InvalidInputError(f"{self.vector_type} vectors take no uint8 ranges")

    @functools.cached_property
    def stored_vectors(self) -> StoredVectors:
        """How this collection's dense vectors are written, queried and read back (built once: every
        search of a uint8 collection needs its ranges as an array)."""
        if self.vector_type != "uint8":
            return StoredVectors(self.vector_type)
        return StoredVectors("uint8", checked_ranges(self.vector_ranges, self.dimension))

    @property
    def named_fields(self) -> bool:
        """Whether the collection holds more than one vector field (so each field has a name)."""
        return self.sparse is not None or self.multivector_dimension is not None

    def to_metadata(self) -> str:
        data = asdict(self)
        data.pop("name")
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_collection_metadata(cls, name: str, text: str | None, where: str) -> CollectionSpec:
        """:meth:`from_metadata` of a collection found in a store (``where``: "milvus at ./m.db");
        one without poolrag's record was made by something else, and is not written into."""
        if text is None:
            raise CollectionMismatchError(
                f"collection {name!r} in {where} was not created by poolrag (no model metadata); "
                "choose another --collection"
            )
        return cls.from_metadata(name, text)

    @classmethod
    def from_metadata(cls, name: str, text: str) -> CollectionSpec:
        """The record as stored; the model's name and identity, which messages show, with control
        and bidi characters escaped (whoever wrote the collection wrote them: a terminal escape in
        a refusal would drive the reader's terminal)."""
        data = json.loads(text)
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        for shown in ("model_name", "model_identity"):
            if isinstance(known.get(shown), str):
                known[shown] = printable(known[shown])
        return cls(name=name, **known)

    def check_compatible(self, stored: CollectionSpec, where: str) -> None:
        """Raise :class:`CollectionMismatchError` if vectors described by ``self`` cannot join ``stored``."""
        problems = []
        if stored.layout != self.layout:
            problems.append(f"layout {stored.layout!r} vs {self.layout!r}")
        if stored.dimension != self.dimension:
            problems.append(f"{stored.dimension}-dimension vectors vs {self.dimension}-dimension")
        if not same_weights(stored.model_identity, self.model_identity):
            problems.append(
                f"model {typed_identity(stored.model_identity)} vs {typed_identity(self.model_identity)}"
            )
        elif not same_outputs(stored.model_outputs, self.model_outputs):
            said = f"the model's outputs {stored.model_outputs} vs {self.model_outputs}"
            problems.append(said + OUTPUTS_SAID)
        if stored.sparse != self.sparse:
            problems.append(f"sparse field {stored.sparse or 'none'} vs {self.sparse or 'none'}")
        if stored.multivector_dimension != self.multivector_dimension:
            problems.append(
                f"token-vector field of size {stored.multivector_dimension} vs {self.multivector_dimension}"
            )
        if stored.vector_type != self.vector_type:
            problems.append(f"{stored.vector_type} vectors vs {self.vector_type}")
        elif (
            stored.vector_ranges is not None
            and self.vector_ranges is not None
            and not np.array_equal(
                checked_ranges(stored.vector_ranges, stored.dimension),
                checked_ranges(self.vector_ranges, self.dimension),
            )
        ):
            problems.append("uint8 buckets of other ranges (another calibration file)")
        if stored.chunk_vectors != self.chunk_vectors:
            said = (_CHUNK_VECTORS_SAID[stored.chunk_vectors], _CHUNK_VECTORS_SAID[self.chunk_vectors])
            problems.append(" vs ".join(said))
        if problems:
            raise CollectionMismatchError(
                f"collection {self.name!r} in {where} holds other vectors than this run makes "
                f"({'; '.join(problems)}: the collection's, then this run's). Mixing them would make "
                f"search meaningless: {self._remedy(stored, problems)}use another --collection, or "
                "delete this one first."
            )

    def _remedy(self, stored: CollectionSpec, problems: Sequence[str]) -> str:
        """The flags of the run that wrote ``stored``, where they are the one difference (``--hybrid``),
        it is this run's model truncated (Matryoshka) and this run left the truncation out, or it is
        another model and nothing else (a re-run that left out ``--model``): the likely fix, said first."""
        if len(problems) == 1 and {stored.sparse, self.sparse} == {None, "bm25"}:
            said = "with" if stored.sparse else "without"
            return f"it was written {said} --hybrid, so run again {said} it, or "
        other_model = not same_weights(stored.model_identity, self.model_identity)
        if other_model and stored.model_name != self.model_name:  # not the same folder retrained
            return self._model_remedy(stored)
        same_model = stored.model_name == self.model_name and stored.full_dimension == self.full_dimension
        if not same_model or stored.dimension == self.dimension:
            return ""
        if stored.dimension >= stored.full_dimension:  # this run truncates a full-size collection's model
            return (
                "it was written without --dimensions, so run again without it, or "
                if len(problems) == 1
                else ""
            )
        return f"it was written with {_truncation_flags(stored)}, so run again with them, or "

    def _model_remedy(self, stored: CollectionSpec) -> str:
        """``--model`` of the run that wrote ``stored`` (its truncation too), where what else differs
        follows from the model (its size, layout, outputs): other flags (``--hybrid``, a vector type,
        late chunking) are no model's, and the run may have meant them."""
        if not stored.model_name or (stored.sparse, stored.vector_type, stored.chunk_vectors) != (
            self.sparse,
            self.vector_type,
            self.chunk_vectors,
        ):
            return ""
        flags = f"--model {shlex.quote(packaged_hub_id(stored.model_name) or stored.model_name)}"
        if stored.dimension < stored.full_dimension:
            flags += f" {_truncation_flags(stored)}"
        return f"it was written with {flags}, so run again with {'them' if ' --' in flags else 'it'}, or "


def _truncation_flags(stored: CollectionSpec) -> str:
    """The flags that truncate a Matryoshka model's vectors to ``stored``'s size, as its run gave them."""
    options = stored.model_options if isinstance(stored.model_options, dict) else {}  # read from a store
    overrides = options.get("hf_overrides")
    assumed = isinstance(overrides, dict) and overrides.get("is_matryoshka") is True
    return f"--dimensions {stored.dimension}" + (" --assume-matryoshka" if assumed else "")


#: what an output fingerprint covers, said where two differ
OUTPUTS_SAID = " (pooled, normalised or tokenised otherwise: --pooler-config, --tokenizer)"


def same_outputs(stored: str | None, used: str | None) -> bool:
    """Whether the same weights give the same vectors; a collection that recorded no fingerprint
    (written before it was) is taken as agreeing."""
    return stored is None or used is None or stored == used


@dataclass
class ChunkRecord:
    """One chunk to store: a ``[D]`` vector (dense) or ``[T, D]`` token vectors (multivector), its
    sparse vector when the collection has a sparse field (required there; empty is allowed), and its
    ``[T, D']`` token vectors when the collection has a token-vector field next to the dense one."""

    id: str
    vector: np.ndarray
    payload: dict[str, Any]
    sparse: SparseVector | None = None
    multivector: np.ndarray | None = None


@dataclass
class StoreHit:
    id: str
    score: float
    payload: dict[str, Any]


SourcePages = Callable[[Iterable[tuple[str, str]]], None]
#: Pages of ``(chunk id, payload without its text)`` (:meth:`VectorStore.scan_payloads`).
PayloadPages = Callable[[Iterable[tuple[str, dict[str, Any]]]], None]


class VectorStore(Protocol):
    """One collection in one database. Every call retries while the database is unreachable."""

    location: str  # human-readable, for messages
    collection: str

    @property
    def name(self) -> str:
        """The registry's kind (``"milvus"``, ``"qdrant"``, ``"qdrant-edge"``), or ``"memory"``."""
        ...

    def read_spec(self) -> CollectionSpec | None:
        """The collection's poolrag metadata; ``None`` if it does not exist."""

    def ensure_collection(self, spec: CollectionSpec) -> CollectionSpec:
        """Create the collection, or check an existing one against ``spec`` and return the stored spec."""

    def update_spec(self, spec: CollectionSpec) -> None:
        """Rewrite an existing collection's poolrag metadata (same layout and model, e.g. with a
        saved retrieval record); refused when ``spec`` describes other vectors."""

    def list_sources(self) -> dict[str, str]:
        """Every chunk id in the collection, mapped to its source."""

    def scan_sources(self, consume: SourcePages) -> None:
        """Hand every ``(chunk id, source)`` pair to ``consume``, a page at a time, so a caller can
        keep them somewhere other than memory (an ingest re-run over a large collection). A scan
        retried after a dropped connection starts over: ``consume`` must accept pairs twice."""

    def scan_payloads(self, consume: PayloadPages) -> None:
        """Hand every ``(chunk id, payload)`` pair to ``consume`` a page at a time, each payload as
        search returns it but without its ``text``: an ingest re-run compares them with the payloads
        it would write, so a record whose fields changed is written again. A retried scan starts
        over, as :meth:`scan_sources`'."""

    def upsert(self, records: Sequence[ChunkRecord]) -> None:
        """Write ``records``; a record whose id is stored already replaces it. Ids are UUID strings
        (:func:`poolrag.ingest.chunk_id` makes them), which Qdrant requires."""

    def delete(self, ids: Sequence[str]) -> None:
        """Remove the chunks with these ids; an id not stored is skipped, not an error."""

    def count(self) -> int:
        """Number of chunks (not token rows)."""

    def optimize(self) -> None:
        """After a run's writes: build what the database builds in the background elsewhere (Qdrant
        Edge's HNSW graph, quantized codes, vacuum); nothing where the database does it itself."""

    def search(self, vector: np.ndarray, limit: int, filter: MetadataFilter | None = None) -> list[StoreHit]:
        """Chunks by cosine similarity to ``vector``, among those whose payload matches ``filter``."""

    def search_multivector(
        self, vectors: np.ndarray, limit: int, filter: MetadataFilter | None = None
    ) -> list[StoreHit]:
        """ColBERT: chunks by MaxSim of the ``[T, D]`` query token vectors, among those matching
        ``filter`` (the best ``limit`` matching chunks, not a post-filtered shortlist); in a dense
        collection with a token-vector field, by that field."""

    def search_sparse(
        self, sparse: SparseVector, limit: int, filter: MetadataFilter | None = None
    ) -> list[StoreHit]:
        """Chunks sharing a term with ``sparse``, by inner product (times IDF in ``bm25`` collections)."""

    def search_hybrid(
        self,
        dense: np.ndarray,
        sparse: SparseVector,
        limit: int,
        *,
        filter: MetadataFilter | None = None,
        fusion: HybridFusion | None = None,
        prefetch: int | None = None,
    ) -> list[StoreHit]:
        """The dense and the sparse ranking (``prefetch`` deep each, default ``max(limit, 50)``) fused
        by ``fusion`` (default: the collection's, from
        :func:`poolrag.stores.language_prior.collection_default_fusion`: min-max normalised scores,
        the sparse share adapted per query, or BM25 leading where the model does not cover the
        collection's recorded language); ``filter`` applies to both. Scores are the fused ones."""

    def fetch_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors by id (``[D]`` or ``[T, D]``)."""

    def fetch_sparse(self, ids: Sequence[str]) -> dict[str, SparseVector]:
        """Stored sparse vectors by id, in a collection with a sparse field."""

    def close(self) -> None:
        """Release the client (and a local database's lock); closing twice does nothing."""

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc_info: object) -> None: ...
