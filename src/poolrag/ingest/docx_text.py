"""A Word document (.docx) as a text model reads it: its paragraphs, lists and tables, in order.

A .docx is a zip of XML parts, its body in the part the package names (``word/document.xml``;
Word Online's ``word/document2.xml``); Python's own ``zipfile`` and ``ElementTree`` read it (no
extra to install), streamed, so a long report costs little memory. Paragraphs are separated by a
blank line, so the chunker cuts between them; list items are lines of their own (``- item``); a
table row is a line with its cells joined by `` | ``. What Word shows is read (text inserted with
tracked changes, equations); what it does not show is not (deleted, moved-away and hidden text, an unfilled
control's prompt, a text box's fallback copy); headers, footers, comments and footnotes are left
out. The document's title (File > Properties) goes into each chunk's payload as ``title``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import IO
from xml.etree import ElementTree

from poolrag.errors import InvalidInputError
from poolrag.ingest.ooxml_package import FALLBACK, XmlBudget, main_part, opened_package, row_line, title
from poolrag.ingest.readers import Document, parsed_document

#: WordprocessingML's namespaces: the transitional one Word writes, and "Strict Open XML"
_WORD = (
    "http://schemas.openxmlformats.org/wordprocessingml/2006/main",
    "http://purl.oclc.org/ooxml/wordprocessingml/main",
)
_MATH = (
    "http://schemas.openxmlformats.org/officeDocument/2006/math",
    "http://purl.oclc.org/ooxml/officeDocument/math",
)
#: what a run's marks read as (``w:t``, and an equation's ``m:t``, hold text)
_RUN_MARKS = {"tab": "\t", "ptab": "\t", "br": "\n", "cr": "\n", "noBreakHyphen": "-"}
#: what is never read: a text box's fallback copy, paragraph properties (their tab stops), a
#: ruby's reading above its text, and text a tracked change moved away (read where it moved to)
_UNREAD = ("Fallback", "pPr", "rt", "moveFrom")


def _local(tag: str) -> tuple[str, str]:
    """``("w", name)`` for a WordprocessingML element, ``("m", name)`` for an equation's, else
    ``("", name)``."""
    if not tag.startswith("{"):
        return "", tag
    namespace, _, name = tag[1:].partition("}")
    return ("w" if namespace in _WORD else "m" if namespace in _MATH else ""), name


class _Paragraph:
    """A paragraph being read: its text so far, and whether it is a list item."""

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.listed = False


class _Body:
    """What is open while a body is read, innermost last: paragraphs (a text box's is inside one),
    table rows and cells, elements never read, content controls; and the run read."""

    def __init__(self) -> None:
        self.paragraphs: list[_Paragraph] = []
        self.rows: list[list[str]] = []  # the cells of each open table row
        self.cells: list[list[str]] = []  # the paragraphs of each open cell
        self.unread = 0  # depth inside elements never read
        self.hidden = False  # the run read is hidden text (Word's "Hidden" font effect)
        self.placeholders: list[bool] = []  # each open content control's: does it show its prompt?
        self.prompt = False  # the content control whose properties were just read shows its prompt

    def skip(self, event: str, name: str, element: ElementTree.Element) -> None:
        """An element never read opens or ends; a paragraph's properties say if it is a list item."""
        self.unread += 1 if event == "start" else -1
        if name == "pPr" and event == "end" and self.paragraphs:
            self.paragraphs[-1].listed = _is_list_item(element)

    def start(self, name: str) -> None:
        if name == "p":
            self.paragraphs.append(_Paragraph())
        elif name == "tr":
            self.rows.append([])
        elif name == "tc":
            self.cells.append([])
        elif name == "sdtContent":
            self.placeholders.append(self.prompt)  # an unfilled control's "Click or tap here to enter text."
            self.unread += self.prompt
            self.prompt = False

    def end(self, name: str, element: ElementTree.Element) -> tuple[str, str] | None:
        """Take what element ``name`` held; the block it completes outside any table cell, if any."""
        shown = bool(self.paragraphs) and not self.unread and not self.hidden
        if name == "t" and shown:
            self.paragraphs[-1].pieces.append(element.text or "")
        elif name in _RUN_MARKS and shown:
            self.paragraphs[-1].pieces.append(_RUN_MARKS[name])
        elif name == "rPr" and not self.unread:
            self.hidden = _has(element, "vanish")
        elif name == "sdtPr":
            self.prompt = _has(element, "showingPlcHdr")
        elif name == "sdtContent" and self.placeholders:
            self.unread -= self.placeholders.pop()
        elif name == "r":
            self.hidden = False
            element.clear()  # its text is taken
        elif name == "p" and self.paragraphs:
            paragraph = self.paragraphs.pop()
            text = "".join(paragraph.pieces).strip()
            return self._block("li" if paragraph.listed else "p", " ".join(text.split("\n")), text)
        elif name == "tc" and self.cells:
            self.rows[-1].append(" ".join(self.cells.pop()))
        elif name == "tr" and self.rows:
            line = row_line(self.rows.pop())
            return self._block("tr", line, line)
        return None

    def _block(self, kind: str, in_cell: str, text: str) -> tuple[str, str] | None:
        """A paragraph's or row's ``text`` as a block, or ``in_cell`` added to the open cell."""
        if text and self.cells:
            self.cells[-1].append(in_cell)
        elif text:
            return kind, text
        return None


def _blocks(xml: IO[bytes]) -> Iterator[tuple[str, str]]:
    """The body's blocks in order as (kind, text): ``"p"`` paragraphs, ``"li"`` list items and
    ``"tr"`` table rows; a table inside a cell is read into that cell. Streamed: text is taken as
    each element ends and what is read is cleared, so memory stays flat however long the body."""
    read = _Body()
    body = None
    for event, element in ElementTree.iterparse(xml, events=("start", "end")):  # type: ignore[arg-type]
        space, name = _local(element.tag)
        if name in _UNREAD and (space == "w" or element.tag == FALLBACK):
            read.skip(event, name, element)
            continue
        if space == "m" and name == "t":
            space = "w"  # an equation's text reads as a run's
        if space != "w":
            continue
        if event == "start":
            if name == "body":
                body = element
            read.start(name)
            continue
        if (block := read.end(name, element)) is not None:
            yield block
        if name in ("p", "tr") and not read.paragraphs and not read.rows and body is not None:
            body.clear()  # what was read goes; the parser keeps what it still builds


def _has(properties: ElementTree.Element, name: str) -> bool:
    """Whether ``properties`` holds the WordprocessingML element ``name`` (either namespace)."""
    return any(properties.find(f"{{{space}}}{name}") is not None for space in _WORD)


def _is_list_item(properties: ElementTree.Element) -> bool:
    """Numbered or bulleted: by its own numbering (``numId`` 0 turns numbering off), or by Word's
    List Bullet and List Number styles, which number it."""
    for space in _WORD:
        numbering = properties.find(f"{{{space}}}numPr/{{{space}}}numId")
        if numbering is not None:
            return numbering.get(f"{{{space}}}val", "0") != "0"
        style = properties.find(f"{{{space}}}pStyle")
        if style is not None and style.get(f"{{{space}}}val", "").startswith(("ListBullet", "ListNumber")):
            return True
    return False


def docx_text(path: Path) -> tuple[str, str]:
    """The text and title of the Word document at ``path``; ``InvalidInputError`` says why it
    cannot be read."""
    with opened_package(path, ".docx", "Word document", "Word 97-2003 .doc") as package:
        try:
            body = XmlBudget().open(package, main_part(package, "word/document.xml"))
        except KeyError:
            raise InvalidInputError("not a Word document (no word/document.xml inside)") from None
        with body:
            parts: list[str] = []
            last = ""
            for kind, text in _blocks(body):
                if parts:  # list items and table rows run on line by line; the rest is paragraphs
                    parts.append("\n" if kind == last and kind != "p" else "\n\n")
                parts.append(f"- {text}" if kind == "li" else text)
                last = kind
        return "".join(parts), title(package)


def read_docx_text(path: Path) -> Document:
    """``path``'s text as a :class:`Document` (its title in the metadata); ``InvalidInputError``
    says why the file cannot be used."""
    text, title = docx_text(path)
    return parsed_document(path, text, "no text in this Word document", title)
