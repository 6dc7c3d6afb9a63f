"""A Word document (.docx) as a text model reads it: its paragraphs, lists and tables, in order.

A .docx is a zip of XML parts, its body in ``word/document.xml``; Python's own ``zipfile`` and
``ElementTree`` read it (no extra to install), streamed, so a long report costs little memory.
Paragraphs are separated by a blank line, so the chunker cuts between them; list items are lines
of their own (``- item``); a table row is a line with its cells joined by `` | ``. Text inserted
with tracked changes is read, deleted text is not; headers, footers, comments and footnotes are
left out, as are a text box's fallback copy. The document's title (File > Properties) goes into each
chunk's payload as ``title``.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO
from xml.etree import ElementTree

from poolrag.errors import InvalidInputError
from poolrag.ingest.readers import CELL_SEPARATOR, Document
from poolrag.text_validity import has_visible_text

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
_TITLE = "{http://purl.org/dc/elements/1.1/}title"
#: the body's XML may not unpack to more than this: a zip bomb is refused, not read
MAX_XML_BYTES = 1 << 29
#: what a run's marks read as (``w:t`` holds text); a paragraph's properties (its tab stops) are skipped
_RUN_MARKS = {f"{_W}tab": "\t", f"{_W}br": "\n", f"{_W}cr": "\n", f"{_W}noBreakHyphen": "-"}
_SKIPPED = (_FALLBACK, f"{_W}pPr")


class _Bounded:
    """A zip member read through a byte budget: past ``limit`` bytes it is refused."""

    def __init__(self, raw: IO[bytes], limit: int) -> None:
        self._raw, self._left = raw, limit

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        self._left -= len(data)
        if self._left < 0:
            raise InvalidInputError(f"its text unpacks to more than {MAX_XML_BYTES >> 20} MiB of XML")
        return data


def _paragraph_text(paragraph: ElementTree.Element) -> str:
    """The visible text of a paragraph's runs, its tabs and line breaks included."""
    pieces: list[str] = []

    def walk(element: ElementTree.Element) -> None:
        for child in element:
            if child.tag == f"{_W}t":
                pieces.append(child.text or "")
            elif child.tag in _RUN_MARKS:
                pieces.append(_RUN_MARKS[child.tag])
            elif child.tag not in _SKIPPED:
                walk(child)

    walk(paragraph)
    return "".join(pieces).strip()


def _is_list_item(paragraph: ElementTree.Element) -> bool:
    """Numbered or bulleted: by its own numbering, or by a list style (Word's List Bullet, List
    Number, List Paragraph) that numbers it."""
    properties = paragraph.find(f"{_W}pPr")
    if properties is None:
        return False
    style = properties.find(f"{_W}pStyle")
    return properties.find(f"{_W}numPr") is not None or (
        style is not None and style.get(f"{_W}val", "").startswith("List")
    )


def _blocks(xml: IO[bytes] | _Bounded) -> Iterator[tuple[str, str]]:
    """The body's blocks in order as (kind, text): ``"p"`` paragraphs, ``"li"`` list items and
    ``"tr"`` table rows; a table inside a cell is read into that cell."""
    rows: list[list[str]] = []  # the cells of each open table row, innermost last
    cells: list[list[str]] = []  # the paragraphs of each open cell, innermost last
    fallback = 0
    for event, element in ElementTree.iterparse(xml, events=("start", "end")):  # type: ignore[arg-type]
        tag = element.tag
        if tag == _FALLBACK:
            fallback += 1 if event == "start" else -1
        elif event == "start":
            if tag == f"{_W}tr":
                rows.append([])
            elif tag == f"{_W}tc":
                cells.append([])
        elif tag == f"{_W}p":
            text = "" if fallback else _paragraph_text(element)
            kind = "li" if _is_list_item(element) else "p"
            element.clear()  # read: its runs are not needed again
            if not text:
                continue
            if cells:
                cells[-1].append(text)
            else:
                yield kind, text
        elif tag == f"{_W}tc" and cells:
            rows[-1].append(" ".join(cells.pop()))
            element.clear()
        elif tag == f"{_W}tr" and rows:
            line = CELL_SEPARATOR.join(cell for cell in rows.pop() if cell)
            if line and cells:
                cells[-1].append(line)
            elif line:
                yield "tr", line
            element.clear()


def docx_text(path: Path) -> tuple[str, str]:
    """The text and title of the Word document at ``path``; ``InvalidInputError`` says why it
    cannot be read."""
    try:
        with zipfile.ZipFile(path) as package:
            try:
                body = package.getinfo("word/document.xml")
            except KeyError:
                raise InvalidInputError("not a Word document (no word/document.xml inside)") from None
            if body.file_size > MAX_XML_BYTES:
                raise InvalidInputError(f"its text unpacks to more than {MAX_XML_BYTES >> 20} MiB of XML")
            with package.open(body) as raw:
                parts: list[str] = []
                last = ""
                for kind, text in _blocks(_Bounded(raw, MAX_XML_BYTES)):
                    if parts:  # list items and table rows run on line by line; the rest is paragraphs
                        parts.append("\n" if kind == last and kind != "p" else "\n\n")
                    parts.append(f"- {text}" if kind == "li" else text)
                    last = kind
            return "".join(parts), _title(package)
    except zipfile.BadZipFile as exc:
        raise InvalidInputError(
            f"not a readable .docx ({exc}): a damaged file, a Word 97-2003 .doc renamed, or one that "
            "needs a password to open"
        ) from None
    except ElementTree.ParseError as exc:
        raise InvalidInputError(f"a damaged Word document (its XML: {exc})") from None


def _title(package: zipfile.ZipFile) -> str:
    """The title in the document's properties, or ``""``."""
    try:
        info = package.getinfo("docProps/core.xml")
    except KeyError:
        return ""
    if info.file_size > 1 << 20:
        return ""
    try:
        title = ElementTree.fromstring(package.read(info)).find(_TITLE)
    except ElementTree.ParseError:
        return ""
    return " ".join((title.text or "").split()) if title is not None else ""


def read_docx_text(path: Path) -> Document:
    """``path``'s text as a :class:`Document` (its title in the metadata); ``InvalidInputError``
    says why the file cannot be used."""
    text, title = docx_text(path)
    if not has_visible_text(text):
        raise InvalidInputError("no text in this Word document")
    metadata = {"filename": path.name, **({"title": title} if title else {})}
    return Document(path.resolve().as_posix(), text, metadata)
