"""What Word (.docx) and PowerPoint (.pptx) files share: a zip package of XML parts that name each
other through relationship parts, read with Python's own ``zipfile`` and ``ElementTree`` (no extra)
through one byte budget per file, so a zip bomb is refused, not read. A damaged package is one
:class:`~poolrag.errors.InvalidInputError` naming what the file is, whichever part broke.
"""

from __future__ import annotations

import posixpath
import re
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO
from xml.etree import ElementTree

from poolrag.errors import InvalidInputError
from poolrag.ingest.readers import CELL_SEPARATOR

#: a file's XML may not unpack to more than this, all its parts together
MAX_XML_BYTES = 1 << 29
#: elements one part parsed whole may hold: a tree costs ~90 bytes an element, so a few hundred KB
#: of deflated ``<x/>`` under the byte budget would otherwise take gigabytes (a real slide: thousands)
MAX_PART_ELEMENTS = 1_000_000
#: a text box's or a drawing's fallback copy, never read (the choice beside it is)
FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
_RELATIONSHIP = "{http://schemas.openxmlformats.org/package/2006/relationships}Relationship"
_TITLE = "{http://purl.org/dc/elements/1.1/}title"
#: zip and zlib errors of a damaged or unusual package (bad deflate data, encrypted or Deflate64 members)
_DAMAGED = (zlib.error, EOFError, RuntimeError, NotImplementedError)
_EMPTY_CELL = re.compile(r"(?<=\|)  (?=\|)")  # "a |  | b" reads "a | | b"


class XmlBudget:
    """The bytes of XML a file may still unpack; each part is read through it."""

    def __init__(self) -> None:
        self.left = MAX_XML_BYTES

    def open(self, package: zipfile.ZipFile, name: str) -> IO[bytes]:
        """Part ``name`` as a stream that is refused once the budget is spent."""
        info = package.getinfo(name)
        if info.file_size > self.left:
            self._refuse()
        return _Bounded(package.open(info), self)  # type: ignore[return-value]

    def parse(self, package: zipfile.ZipFile, name: str) -> ElementTree.Element:
        """Part ``name`` parsed whole (a slide: small, read at once), refused past
        :data:`MAX_PART_ELEMENTS` elements."""
        with self.open(package, name) as stream:
            events = ElementTree.iterparse(stream, events=("start",))  # type: ignore[arg-type]
            for count, _ in enumerate(events, 1):
                if count > MAX_PART_ELEMENTS:
                    raise InvalidInputError(f"{name} holds more than {MAX_PART_ELEMENTS:,} XML elements")
            return events.root  # type: ignore[attr-defined]

    def _refuse(self) -> None:
        raise InvalidInputError(f"its text unpacks to more than {MAX_XML_BYTES >> 20} MiB of XML")


class _Bounded:
    def __init__(self, raw: IO[bytes], budget: XmlBudget) -> None:
        self._raw, self._budget = raw, budget

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        self._budget.left -= len(data)
        if self._budget.left < 0:
            self._budget._refuse()
        return data

    def __enter__(self) -> _Bounded:
        return self

    def __exit__(self, *exc: object) -> None:
        self._raw.close()


@contextmanager
def opened_package(path: Path, suffix: str, kind: str, old_kind: str) -> Iterator[zipfile.ZipFile]:
    """``path`` opened as a ``kind`` package (``".docx"``, ``"Word document"``); whatever breaks
    inside, while it is read, is one line saying so (``old_kind``: the binary format a renamed file
    may be)."""
    try:
        with zipfile.ZipFile(path) as package:
            yield package
    except zipfile.BadZipFile as exc:
        raise InvalidInputError(
            f"not a readable {suffix} ({exc}): a damaged file, a {old_kind} renamed, or one that needs "
            "a password to open"
        ) from None
    except ElementTree.ParseError as exc:
        raise InvalidInputError(f"a damaged {kind} (its XML: {exc})") from None
    except _DAMAGED as exc:
        raise InvalidInputError(f"a damaged {kind} ({type(exc).__name__}: {exc})") from None


def small_part(package: zipfile.ZipFile, name: str) -> ElementTree.Element | None:
    """A package's bookkeeping part (relationships, properties) parsed, or ``None`` when it is
    missing, damaged or over 1 MiB: the text is read without it."""
    try:
        info = package.getinfo(name)
        return ElementTree.fromstring(package.read(info)) if info.file_size <= 1 << 20 else None
    except (KeyError, ElementTree.ParseError):
        return None


def relationships(package: zipfile.ZipFile, part: str) -> dict[str, tuple[str, str]]:
    """What part ``part`` (``""``: the package itself) links to: id -> (type, part name), only
    links to parts inside the package."""
    folder, name = posixpath.split(part)
    listing = small_part(package, posixpath.join(folder, "_rels", f"{name}.rels"))
    names = set(package.namelist())
    links: dict[str, tuple[str, str]] = {}
    for link in listing.iter(_RELATIONSHIP) if listing is not None else ():
        target = link.get("Target", "")
        target = target.lstrip("/") if target.startswith("/") else posixpath.join(folder, target)
        target = posixpath.normpath(target)
        if target in names:
            links[link.get("Id", "")] = (link.get("Type", "").rsplit("/", 1)[-1], target)
    return links


def main_part(package: zipfile.ZipFile, default: str) -> str:
    """The document's own part, as the package's relationships name it (Word Online writes
    ``word/document2.xml``), else ``default``."""
    for kind, target in relationships(package, "").values():
        if kind == "officeDocument":
            return target
    return default


def title(package: zipfile.ZipFile) -> str:
    """The title in the file's properties (File > Properties), or ``""``."""
    properties = small_part(package, "docProps/core.xml")
    found = properties.find(_TITLE) if properties is not None else None
    return " ".join((found.text or "").split()) if found is not None else ""


def row_line(row: list[str]) -> str:
    """A table row as one line, its cells joined by `` | ``: empty cells at its ends say nothing,
    those between keep the columns."""
    while row and not row[-1]:
        row.pop()
    while row and not row[0]:
        row.pop(0)
    return _EMPTY_CELL.sub(" ", CELL_SEPARATOR.join(row))
