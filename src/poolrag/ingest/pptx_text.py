"""A PowerPoint deck (.pptx) as a text model reads it: each slide's text, then its speaker notes,
one document whose chunks name their slide.

Slides are read in the deck's order (the presentation's slide list, not the parts' names), each
shape's paragraphs a line apiece and shapes a blank line apart, a table's rows as lines with their
cells joined by `` | ``; the slide number, date and footer placeholders are left out, as is a
drawing's fallback copy. Slides are joined by a blank line, and each chunk's payload names the
``page`` (the slide, from 1) its text starts on, as a PDF's does; the deck's title (File >
Properties) is its ``title``. Read with Python's own ``zipfile`` and ``ElementTree`` (no extra).
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree

from poolrag.errors import InvalidInputError
from poolrag.ingest.ooxml_package import (
    FALLBACK,
    XmlBudget,
    main_part,
    opened_package,
    relationships,
    row_line,
    title,
)
from poolrag.ingest.readers import Document, parsed_document

#: PresentationML and DrawingML namespaces: the transitional ones PowerPoint writes, and Strict
_PRESENTATION = (
    "http://schemas.openxmlformats.org/presentationml/2006/main",
    "http://purl.oclc.org/ooxml/presentationml/main",
)
_DRAWING = (
    "http://schemas.openxmlformats.org/drawingml/2006/main",
    "http://purl.oclc.org/ooxml/drawingml/main",
)
#: placeholders that repeat on every slide rather than say anything of it
_FURNITURE = ("sldNum", "dt", "ftr", "hdr", "sldImg")
SLIDE_BREAK = "\n\n"


def _local(tag: str, spaces: tuple[str, ...]) -> str | None:
    """The element's name when it is in ``spaces``, else ``None``."""
    namespace, _, name = tag[1:].partition("}")
    return name if tag.startswith("{") and namespace in spaces else None


def _paragraph(element: ElementTree.Element) -> str:
    """A DrawingML paragraph's text: its runs and fields, a line break as a new line."""
    pieces = []
    for node in element.iter():
        name = _local(node.tag, _DRAWING)
        if name == "t":
            pieces.append(node.text or "")
        elif name == "br":
            pieces.append("\n")
        elif name == "tab":
            pieces.append("\t")
    return "".join(pieces).strip()


def _is_furniture(shape: ElementTree.Element) -> bool:
    for node in shape.iter():
        if _local(node.tag, _PRESENTATION) == "ph":
            return node.get("type") in _FURNITURE
    return False


def _lines(element: ElementTree.Element) -> list[str]:
    """The non-empty paragraphs under ``element`` (a text body, a table cell)."""
    paragraphs = (_paragraph(node) for node in element.iter() if _local(node.tag, _DRAWING) == "p")
    return [text for text in paragraphs if text]


def _blocks(element: ElementTree.Element) -> Iterator[str]:
    """The text of each shape under ``element`` in the slide's order: its paragraphs as lines; a
    table's rows as lines of cells; a group's shapes one by one."""
    for child in element:
        if child.tag == FALLBACK or (_local(child.tag, _PRESENTATION) == "sp" and _is_furniture(child)):
            continue
        if _local(child.tag, _PRESENTATION + _DRAWING) == "txBody":
            if lines := _lines(child):
                yield "\n".join(lines)
        elif _local(child.tag, _DRAWING) == "tbl":
            rows = (
                row_line([" ".join(_lines(cell)) for cell in row if _local(cell.tag, _DRAWING) == "tc"])
                for row in child
                if _local(row.tag, _DRAWING) == "tr"
            )
            if table := "\n".join(line for line in rows if line):
                yield table
        else:
            yield from _blocks(child)


def _slide_text(budget: XmlBudget, package: zipfile.ZipFile, slide: str) -> str:
    """A slide's shapes, then its speaker notes, each a block."""
    blocks = list(_blocks(budget.parse(package, slide)))
    for kind, notes in relationships(package, slide).values():
        if kind == "notesSlide":
            blocks.extend(_blocks(budget.parse(package, notes)))
    return "\n\n".join(blocks)


def _slides(budget: XmlBudget, package: zipfile.ZipFile) -> list[str]:
    """The deck's slide parts in its order."""
    deck = main_part(package, "ppt/presentation.xml")
    try:
        listing = budget.parse(package, deck)
    except KeyError:
        listing = None
    if listing is None or _local(listing.tag, _PRESENTATION) != "presentation":  # a .docx renamed
        raise InvalidInputError("not a PowerPoint presentation (no ppt/presentation.xml inside)")
    links = relationships(package, deck)
    order = []
    for node in listing.iter():
        if _local(node.tag, _PRESENTATION) == "sldId":
            link = next((links.get(v) for k, v in node.attrib.items() if k.endswith("}id")), None)
            if link is not None and link[0] == "slide":
                order.append(link[1])
    return order


def pptx_text(path: Path) -> tuple[list[str], str]:
    """The text of each slide of the deck at ``path``, and its title; ``InvalidInputError`` says
    why it cannot be read."""
    with opened_package(path, ".pptx", "PowerPoint presentation", "PowerPoint 97-2003 .ppt") as package:
        budget = XmlBudget()
        return [_slide_text(budget, package, slide) for slide in _slides(budget, package)], title(package)


def read_pptx_text(path: Path) -> Document:
    """``path``'s slides as one :class:`Document` with each slide's start (its chunks name their
    slide as ``page``); ``InvalidInputError`` says why the file cannot be used."""
    slides, deck_title = pptx_text(path)
    starts, offset = [], 0
    for text in slides:
        starts.append(offset)
        offset += len(text) + len(SLIDE_BREAK) if text else 0
    text = SLIDE_BREAK.join(slide for slide in slides if slide)
    return parsed_document(path, text, "no text in this presentation", deck_title, tuple(starts))
