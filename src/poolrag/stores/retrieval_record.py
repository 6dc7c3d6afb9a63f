"""The hybrid setting ``poolrag eval --tune --save`` chose for a collection, kept in its metadata.

The record travels with the collection (Milvus collection properties, Qdrant collection metadata,
qdrant-edge's ``poolrag.json``, the in-memory store's spec), so every reader of the collection —
``poolrag search``, :class:`~poolrag.retrieval.Retriever`, the partner packages — fuses the way the
user's own judgements chose. It holds numbers and names from a fixed set only: read back, every field
is checked and a bad record is refused with the collection and the field named. Nothing in it picks
code to import or run; a fusion name only selects one of the rules in :mod:`poolrag.stores.hybrid`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from poolrag.errors import InvalidInputError
from poolrag.stores.base import CollectionSpec, HybridFusion, VectorStore
from poolrag.stores.errors import CollectionNotFoundError
from poolrag.stores.hybrid import PLAIN_RULES, SHARE_RULES

RECORD_VERSION = 1
#: Fusion rules a record may name (the stores' own); the weighted ones carry the sparse leg's share.
FUSION_METHODS: tuple[str, ...] = (*SHARE_RULES, *PLAIN_RULES)
WEIGHTED_METHODS = frozenset(SHARE_RULES)
#: Deepest leg a record may ask for: deeper legs only slow searches and hurt rank fusion.
MAX_PREFETCH = 10_000
_FIELDS = frozenset({"version", "fusion", "sparse_weight", "prefetch", "rerank_weight"})


class RetrievalRecordError(InvalidInputError):
    """A collection's saved retrieval record is malformed; it is refused rather than ignored."""


@dataclass(frozen=True)
class RetrievalRecord:
    """A tuned hybrid setting.

    Attributes:
        fusion: the hybrid fusion rule (``("adaptive", w)``, ``("minmax", w)``, ``("weighted", w)``,
            ``"rrf"``, ``"dbsf"``).
        prefetch: how deep each hybrid leg went when the setting was chosen.
        rerank_weight: the cross-encoder's share in the fused second stage, when tuned with one.
    """

    fusion: HybridFusion
    prefetch: int
    rerank_weight: float | None = None
    version: int = RECORD_VERSION

    def to_metadata(self) -> dict[str, Any]:
        method, weight = (self.fusion, None) if isinstance(self.fusion, str) else self.fusion
        return {
            "version": self.version,
            "fusion": method,
            "sparse_weight": weight,
            "prefetch": self.prefetch,
            "rerank_weight": self.rerank_weight,
        }

    @classmethod
    def from_metadata(cls, collection: str, data: object) -> RetrievalRecord:
        """The record ``data`` describes, or :class:`RetrievalRecordError` naming the bad field."""

        def bad(field: str, why: str) -> RetrievalRecordError:
            return RetrievalRecordError(
                f"collection {collection!r} has a bad saved retrieval record: {field} {why}; "
                "run 'poolrag eval --tune --save' again to replace it"
            )

        if not isinstance(data, dict):
            raise bad("record", f"must be an object, got {type(data).__name__}")
        unknown = sorted(str(key) for key in data if key not in _FIELDS)
        if unknown:
            raise bad(unknown[0], "is not a field of the record")
        version = data.get("version")
        if version != RECORD_VERSION or isinstance(version, bool):
            raise bad("version", f"must be {RECORD_VERSION}, got {version!r}")
        method = data.get("fusion")
        if method not in FUSION_METHODS:
            raise bad("fusion", f"must be one of {', '.join(FUSION_METHODS)}, got {method!r}")
        weight = data.get("sparse_weight")
        fusion: HybridFusion
        if method in WEIGHTED_METHODS:
            if not _unit_interval(weight):
                raise bad("sparse_weight", f"must be a number in [0, 1] for {method}, got {weight!r}")
            fusion = (method, float(weight))  # type: ignore[assignment,arg-type]
        else:
            if weight is not None:
                raise bad("sparse_weight", f"must be null for {method}, got {weight!r}")
            fusion = method  # type: ignore[assignment]
        prefetch = data.get("prefetch")
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or not 1 <= prefetch <= MAX_PREFETCH:
            raise bad("prefetch", f"must be an integer in [1, {MAX_PREFETCH}], got {prefetch!r}")
        rerank_weight = data.get("rerank_weight")
        if rerank_weight is not None and not _unit_interval(rerank_weight):
            raise bad("rerank_weight", f"must be null or a number in [0, 1], got {rerank_weight!r}")
        share = None if rerank_weight is None else float(rerank_weight)
        return cls(fusion, prefetch, share)


def _unit_interval(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0.0 <= value <= 1.0
    )


def saved_record(spec: CollectionSpec) -> RetrievalRecord | None:
    """The collection's saved record (checked), or ``None`` when nothing was saved."""
    if spec.retrieval is None:
        return None
    return RetrievalRecord.from_metadata(spec.name, spec.retrieval)


def save_record(store: VectorStore, record: RetrievalRecord) -> CollectionSpec:
    """Write ``record`` into the metadata of ``store``'s collection (replacing an earlier one)."""
    spec = store.read_spec()
    if spec is None:
        raise CollectionNotFoundError(
            f"collection {store.collection!r} in {store.name} at {store.location} does not exist; "
            "nothing to save the retrieval record into"
        )
    updated = dataclasses.replace(spec, retrieval=record.to_metadata())
    store.update_spec(updated)
    return updated
