"""A Qdrant local folder's points read as data before qdrant-client opens the folder.

qdrant-client's local mode keeps each point as a pickle in ``collection/<name>/storage.sqlite`` and
unpickles every row of every collection ``meta.json`` lists when a client opens the folder
(``qdrant_client/local/persistence.py``, ``CollectionPersistence.load``): a row holding any other
pickle runs its code in the opening process. A store folder is data (copied, downloaded, shared, or
in a folder others can write), so each row is first read by an unpickler that builds only
qdrant-client's model classes and UUIDs, and a folder with any other row is refused, naming the
file, the row and what it asked for.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import sqlite3
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

from poolrag.stores.errors import UnsafeStoreFileError

#: the file qdrant-client's local mode lists a folder's collections in (it writes one into any
#: folder it opens)
QDRANT_LOCAL_META = "meta.json"
#: the module qdrant-client's points and their parts (sparse vectors, ...) are pickled from
_MODELS_MODULE = "qdrant_client.http.models.models"


class _RefusedGlobal(pickle.UnpicklingError):
    """A global a row's pickle names that is not a part of a point."""


class _PointUnpickler(pickle.Unpickler):
    """Builds a pydantic model :data:`_MODELS_MODULE` defines, or a UUID; any other global a pickle
    names (a function to call, a class of another module) is refused unbuilt. Enums are refused too:
    a point holds none (its payload is JSON), and a pickle can set attributes on the one shared
    member it names (``Distance.COSINE``'s value, for every later request of the process)."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("uuid", "UUID"):
            return uuid.UUID
        if module == _MODELS_MODULE:
            from pydantic import BaseModel
            from qdrant_client.http.models import models

            found = getattr(models, name, None)
            if isinstance(found, type) and issubclass(found, BaseModel) and found.__module__ == module:
                return found
        raise _RefusedGlobal(f"{module}.{name}")


def check_local_points(folder: str | os.PathLike[str]) -> None:
    """Raise :class:`UnsafeStoreFileError` unless every row of every collection the Qdrant local
    ``folder`` lists is a point; a folder without a readable ``meta.json`` opens no collection."""
    try:
        meta = json.loads((Path(folder) / QDRANT_LOCAL_META).read_text(encoding="utf-8"))
        names = meta["collections"]
    except (OSError, ValueError, KeyError, TypeError):
        return  # qdrant-client creates or refuses it, before unpickling anything
    if not isinstance(names, dict):
        return
    for name in names:
        # the path qdrant-client opens, whatever the name holds (it refuses one outside the folder)
        _check_points(Path(os.path.join(folder, "collection", str(name))) / "storage.sqlite")


class _NotAPoint(pickle.UnpicklingError):
    """A row that loads as something other than a point (qdrant-client would fail on it)."""


def _check_points(points: Path) -> None:
    if not points.is_file():
        return
    uri = f"file:{urllib.parse.quote(str(points.resolve()))}?mode=ro"
    try:
        db = sqlite3.connect(uri, uri=True)
    except sqlite3.Error:
        return  # unreadable: qdrant-client fails on it before loading a row
    try:
        _check_plain_table(db, points)
        rows = db.execute("SELECT rowid, point FROM points")
        for rowid, value in rows:
            try:
                point = _PointUnpickler(io.BytesIO(bytes(value))).load()
                if type(point).__name__ != "PointStruct" or type(point).__module__ != _MODELS_MODULE:
                    raise _NotAPoint(type(point).__name__)
            except Exception as exc:  # any row that does not load as a point is not opened
                raise UnsafeStoreFileError(
                    f"refusing to open the Qdrant local folder: {points} row {rowid} is not a point "
                    f"qdrant-client wrote ({_why(exc)}), and qdrant-client would unpickle it, running "
                    "what it names; open only a folder you wrote, or ingest the documents again"
                ) from None
    except sqlite3.Error:
        return  # not qdrant-client's table: it refuses the file itself
    finally:
        db.close()


def _check_plain_table(db: sqlite3.Connection, points: Path) -> None:
    """Refuse a ``points`` that is not the ordinary table qdrant-client creates: a view (or a
    virtual table reading one) computes its rows on each read, e.g. with ``random()``, so the rows
    this check reads need not be the ones qdrant-client then unpickles."""
    found = db.execute("SELECT type, sql FROM sqlite_master WHERE name = 'points' COLLATE NOCASE").fetchone()
    if found is None:
        return  # qdrant-client creates the table, empty
    kind, sql = found
    if kind != "table" or (sql or "").lstrip().upper().startswith("CREATE VIRTUAL"):
        raise UnsafeStoreFileError(
            f"refusing to open the Qdrant local folder: {points} keeps its points in a {kind} "
            f"({' '.join(str(sql).split())[:80]}), not the table qdrant-client creates; its rows "
            "can differ from one read to the next, and qdrant-client would unpickle them; open only "
            "a folder you wrote, or ingest the documents again"
        )


def _why(exc: Exception) -> str:
    if isinstance(exc, _RefusedGlobal):
        return f"its pickle names {exc}"
    if isinstance(exc, _NotAPoint):
        return f"it holds a {exc}"
    return f"unreadable: {type(exc).__name__}"
