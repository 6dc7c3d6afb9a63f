"""A ColBERT index in Qdrant: one point per document, its token vectors as a MaxSim multivector.

Qdrant scores multivectors server-side (``MultiVectorComparator.MAX_SIM``) and applies payload
filters in the same query, so ``k`` results are the best ``k`` among the matching documents rather
than a post-filtered shortlist. Works with any ``QdrantClient``: local mode (``":memory:"`` or a
path) for development and tests, a Qdrant server by URL in production.

The payload layout is configurable so that the retrievers can also search ColBERT collections that
``poolrag ingest`` filled (text under ``"text"``, metadata as top-level payload fields).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from qdrant_client import QdrantClient, models

from integrations.colbert.index import Hit, MetadataFilter, check_batch, check_filter
from poolrag import InvalidInputError

logger = logging.getLogger(__name__)

#: Qdrant point ids must be integers or UUIDs; arbitrary string ids map to UUIDs in this namespace.
_ID_NAMESPACE = uuid.UUID("0b5c6a52-3a5e-4f0e-9d4c-6f1b2f8f9a11")
TEXT_KEY = "page_content"
METADATA_KEY = "metadata"
ID_KEY = "doc_id"


def point_id(doc_id: str) -> str:
    """The Qdrant point id of a document id: the id itself when it is a UUID, else a stable UUID5."""
    try:
        return str(uuid.UUID(doc_id))
    except ValueError:
        return str(uuid.uuid5(_ID_NAMESPACE, doc_id))


class QdrantMultiVectorIndex:
    """ColBERT documents in one Qdrant collection, scored by MaxSim.

    Args:
        client: a ``QdrantClient`` (``QdrantClient(location=":memory:")``, ``path=...`` or ``url=...``).
        collection_name: created on first ``add`` if missing; an existing collection must hold
            MaxSim multivectors of the same size.
        dim: token-vector size, to create the collection up front (else taken from the first ``add``).
        text_key: payload field holding the text (``"text"`` for collections ``poolrag ingest`` filled).
        metadata_key: payload field holding the metadata dict, or ``None`` when metadata fields are
            top-level payload fields (as ``poolrag ingest`` writes them).
    """

    def __init__(
        self,
        client: QdrantClient,
        collection_name: str,
        dim: int | None = None,
        *,
        text_key: str = TEXT_KEY,
        metadata_key: str | None = METADATA_KEY,
    ) -> None:
        if not collection_name:
            raise InvalidInputError("collection_name must not be empty")
        if not text_key or text_key in (metadata_key, ID_KEY):
            raise InvalidInputError(
                f"text_key must be a non-empty payload field of its own, got {text_key!r}"
            )
        self.client = client
        self.collection_name = collection_name
        self.text_key = text_key
        self.metadata_key = metadata_key
        self._dim: int | None = None
        if client.collection_exists(collection_name):
            self._dim = self._existing_dim()
            if dim is not None and dim != self._dim:
                raise InvalidInputError(
                    f"collection {collection_name!r} holds {self._dim}-dim token vectors, not {dim}-dim"
                )
        elif dim is not None:
            self._create(dim)

    def __repr__(self) -> str:
        return f"QdrantMultiVectorIndex({self.collection_name!r}, dim={self._dim})"

    def _existing_dim(self) -> int:
        params = self.client.get_collection(self.collection_name).config.params.vectors
        if not isinstance(params, models.VectorParams) or params.multivector_config is None:
            raise InvalidInputError(
                f"collection {self.collection_name!r} exists but does not hold one unnamed MaxSim "
                "multivector per point; use another collection name for ColBERT documents"
            )
        if params.multivector_config.comparator != models.MultiVectorComparator.MAX_SIM:
            raise InvalidInputError(
                f"collection {self.collection_name!r} does not compare multivectors by MaxSim"
            )
        return int(params.size)

    def _create(self, dim: int) -> None:
        # Dot product: ColBERT token vectors are unit length, and MaxSim is defined on the raw dot
        # products, so the scores equal Engine.score's.
        self.client.create_collection(
            self.collection_name,
            vectors_config=models.VectorParams(
                size=dim,
                distance=models.Distance.DOT,
                multivector_config=models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM),
            ),
        )
        self._dim = dim
        logger.info(
            "created Qdrant collection %r for %d-dim ColBERT token vectors", self.collection_name, dim
        )

    def __len__(self) -> int:
        if self._dim is None:
            return 0
        return int(self.client.count(self.collection_name, exact=True).count)

    def add(
        self,
        ids: Sequence[str],
        texts: Sequence[str],
        vectors: Sequence[np.ndarray],
        metadatas: Sequence[Mapping[str, Any]],
    ) -> None:
        dim = check_batch(ids, texts, vectors, metadatas)
        if not ids:
            return
        if self._dim is None:
            self._create(dim)
        elif dim != self._dim:
            raise InvalidInputError(
                f"collection {self.collection_name!r} holds {self._dim}-dim token vectors, got {dim}-dim ones"
            )
        points = [
            models.PointStruct(
                id=point_id(doc_id),
                vector=np.asarray(matrix, dtype=np.float32).tolist(),
                payload=self._payload(doc_id, text, metadata),
            )
            for doc_id, text, matrix, metadata in zip(ids, texts, vectors, metadatas, strict=True)
        ]
        self.client.upsert(self.collection_name, points=points, wait=True)

    def _payload(self, doc_id: str, text: str, metadata: Mapping[str, Any]) -> dict[str, Any]:
        if self.metadata_key is not None:
            return {ID_KEY: doc_id, self.text_key: text, self.metadata_key: dict(metadata)}
        clash = {ID_KEY, self.text_key} & set(metadata)
        if clash:
            raise InvalidInputError(f"metadata keys {sorted(clash)} collide with the payload's own fields")
        return {**metadata, ID_KEY: doc_id, self.text_key: text}

    def _hit(self, point: Any) -> Hit:
        payload = dict(point.payload or {})
        doc_id = str(payload.pop(ID_KEY, point.id))
        text = str(payload.pop(self.text_key, ""))
        metadata = dict(payload.get(self.metadata_key) or {}) if self.metadata_key is not None else payload
        return Hit(id=doc_id, score=float(point.score), text=text, metadata=metadata)

    def delete(self, ids: Sequence[str]) -> None:
        if self._dim is None or not ids:
            return
        selector = models.PointIdsList(points=[point_id(doc_id) for doc_id in ids])
        self.client.delete(self.collection_name, points_selector=selector, wait=True)

    def search(self, query: np.ndarray, k: int, filter: MetadataFilter | None = None) -> list[Hit]:
        if k < 1:
            raise InvalidInputError(f"k must be at least 1, got {k}")
        wanted = check_filter(filter)
        if self._dim is None:
            return []
        query = np.asarray(query, dtype=np.float32)
        if query.ndim != 2 or query.shape[1] != self._dim:
            raise InvalidInputError(f"query must be a [tokens, {self._dim}] matrix, got shape {query.shape}")
        result = self.client.query_points(
            self.collection_name,
            query=query.tolist(),
            limit=k,
            query_filter=_qdrant_filter(wanted, self.metadata_key),
            with_payload=True,
        )
        return [self._hit(point) for point in result.points]


def _qdrant_filter(wanted: dict[str, Any], metadata_key: str | None) -> models.Filter | None:
    if not wanted:
        return None
    conditions: list[models.Condition] = []
    for key, value in wanted.items():
        field = f"{metadata_key}.{key}" if metadata_key is not None else key
        if isinstance(value, float):  # Qdrant matches only keywords, integers and booleans exactly
            conditions.append(models.FieldCondition(key=field, range=models.Range(gte=value, lte=value)))
            continue
        values = value if isinstance(value, list) else [value]
        if not all(isinstance(v, (str, int)) for v in values):
            raise InvalidInputError(
                f"Qdrant filters match strings, integers and booleans; got {value!r} for {key!r}"
            )
        match = models.MatchAny(any=value) if isinstance(value, list) else models.MatchValue(value=value)
        conditions.append(models.FieldCondition(key=field, match=match))
    return models.Filter(must=conditions)
