"""Checks every retriever makes before searching: the collection exists, holds the query model's
vectors, and ``k`` is a count. A mismatch is refused, since scores across models mean nothing."""

from __future__ import annotations

from poolrag.errors import InvalidInputError
from poolrag.stores.base import CollectionSpec, VectorStore, weights_fingerprint
from poolrag.stores.errors import CollectionMismatchError, CollectionNotFoundError


def existing_spec(store: VectorStore) -> CollectionSpec:
    spec = store.read_spec()
    if spec is None:
        raise CollectionNotFoundError(
            f"collection {store.collection!r} does not exist in {store.name} at {store.location}; "
            "ingest into it first"
        )
    return spec


def check_model(spec: CollectionSpec, identity: str, where: str) -> None:
    if weights_fingerprint(spec.model_identity) != weights_fingerprint(identity):
        raise CollectionMismatchError(
            f"collection {spec.name!r} in {where} was filled with {spec.model_identity}, but the query "
            f"model is {identity}; search with the model the collection was ingested with"
        )


def check_k(k: object) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidInputError(f"k must be a positive integer, got {k!r}")
