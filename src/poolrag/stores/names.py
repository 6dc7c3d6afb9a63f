"""Collection names every store accepts, checked once before anything is loaded or opened.

Milvus (server and Lite) wants a letter or ``_`` first, then letters, digits and ``_``, at most 255
bytes; Qdrant refuses ``/``, ``\\`` and NUL and more than 255 characters; Qdrant Edge turns the
name into a folder. The intersection, ``[A-Za-z_][A-Za-z0-9_]{0,254}``, is accepted everywhere, so
a collection can move between stores and a name like ``../../escape`` never becomes a path.
"""

from __future__ import annotations

import re

from poolrag.errors import InvalidInputError

MAX_LENGTH = 255
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_collection_name(name: object) -> str:
    """``name`` if every store accepts it, else :class:`InvalidInputError` saying what is wrong."""
    if not isinstance(name, str) or not name:
        raise InvalidInputError("collection name is empty; give --collection NAME")
    shown = name if len(name) <= 60 else f"{name[:57]}..."
    if len(name) > MAX_LENGTH:
        raise InvalidInputError(
            f"collection name {shown!r} has {len(name)} characters; at most {MAX_LENGTH} are allowed"
        )
    if not _NAME.fullmatch(name):
        raise InvalidInputError(
            f"invalid collection name {shown!r}: use letters, digits and '_', starting with a letter or '_'"
        )
    return name
