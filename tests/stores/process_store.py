"""A store kind that exists only in the tests: the proof that a new store is one file and one
registry line (``tests/stores/conftest.py`` adds the line). It is the in-memory store under another
name whose collections outlive the object, kept per ``--path`` and collection until the process ends,
as a database keeps them; everything else comes from :class:`~poolrag.stores.template.StoreTemplate`.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from poolrag.stores import InMemoryStore, StoreEntry, StoreLocation

KIND = "process"
#: The registry line of this store (no extra: it needs nothing beyond poolrag).
ENTRY = StoreEntry(__name__, "ProcessStore")


class ProcessStore(InMemoryStore):
    name = KIND
    kept: ClassVar[dict[tuple[str, str], ProcessStore]] = {}

    @classmethod
    def open(cls, collection: str, address: StoreLocation) -> ProcessStore:
        address.refuse_other_than(("path",), "process takes --path, not --uri/--url")
        key = (str(Path(address.path or "poolrag_process").resolve()), collection)
        if key not in cls.kept:
            cls.kept[key] = cls(collection)
        return cls.kept[key]
