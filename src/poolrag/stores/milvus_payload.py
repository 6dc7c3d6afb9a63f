"""Chunk payloads as Milvus rows and back, so Milvus returns what Qdrant returns.

A Milvus row mixes schema columns (``id``, ``vector``, ``source``; ``chunk_id`` and ``tok`` for
ColBERT rows) with dynamic fields, while a Qdrant payload is free-form. So, on the way in:

* a payload key that is a column name (a JSONL record with a ``vector`` field, say) would overwrite
  that column; such keys ride in one dynamic field, ``_poolrag_renamed``, under their own names;
* a payload without ``source`` gets an empty column and the flag ``_poolrag_no_source``, so it
  comes back without one (as from Qdrant) rather than with ``source: ""``;
* a ``source`` longer than the column (``SOURCE_MAX`` bytes; a JSONL ``id`` can be any length) is
  stored cut, with a hash of the whole so distinct sources stay distinct, and the whole source in
  the dynamic field ``_poolrag_source``.

On the way out both are undone, so search results carry the payload exactly as it was given.
"""

from __future__ import annotations

import hashlib
from typing import Any

SOURCE_MAX = 4096  # bytes of the VARCHAR source column
RENAMED_KEY = "_poolrag_renamed"
FULL_SOURCE_KEY = "_poolrag_source"
NO_SOURCE_KEY = "_poolrag_no_source"
SPARSE_COLUMN = "_poolrag_sparse"  # prefixed: a collection may already hold a payload key "sparse"
COLUMNS = frozenset(
    {"id", "vector", "chunk_id", "tok", "$meta", SPARSE_COLUMN, RENAMED_KEY, FULL_SOURCE_KEY, NO_SOURCE_KEY}
)


def source_column(source: str) -> str:
    """``source`` if it fits the column, else a prefix of it plus a hash of all of it."""
    raw = source.encode("utf-8", "surrogatepass")
    if len(raw) <= SOURCE_MAX:
        return source
    digest = hashlib.sha256(raw).hexdigest()
    prefix = raw[: SOURCE_MAX - len(digest) - 3].decode("utf-8", "ignore")
    return f"{prefix}...{digest}"


def to_row_fields(payload: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The ``source`` column value and the other fields of a row for ``payload``."""
    fields = dict(payload)
    has_source = "source" in fields
    source = str(fields.pop("source", ""))
    column = source_column(source)
    renamed = {k: fields.pop(k) for k in [k for k in fields if k in COLUMNS]}
    if renamed:
        fields[RENAMED_KEY] = renamed
    if column != source:
        fields[FULL_SOURCE_KEY] = source
    if not has_source:
        fields[NO_SOURCE_KEY] = True
    return column, fields


def full_source(row: dict[str, Any]) -> str:
    """The whole source of a row read with ``source`` and ``_poolrag_source`` among its fields."""
    return str(row.get(FULL_SOURCE_KEY) or row.get("source", ""))


def from_entity(entity: dict[str, Any]) -> dict[str, Any]:
    """The payload a row was written from (schema columns dropped, renamed keys restored)."""
    payload = {k: v for k, v in entity.items() if k not in COLUMNS and k != "source"}
    payload.update(entity.get(RENAMED_KEY) or {})
    if "source" in entity and not entity.get(NO_SOURCE_KEY):
        payload["source"] = full_source(entity)
    return payload
