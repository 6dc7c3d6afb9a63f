"""PDF pages as a page retriever reads them: checked and their text read once, rendered when embedded.

pdfium (through ``pypdfium2``, a PyPI wheel with no system binary) reads and renders the pages, in a
child process with bounded memory and time (:mod:`poolrag.pdfium_process`): a compression bomb, a
file that crashes pdfium or one that never finishes is one line about that file.

A PDF is checked whole when it is listed (it opens, it has at most ``MAX_PDF_PAGES`` pages, each page
loads and its text layer reads), so that a broken file is one line in the run's report and never
stops a run halfway through a batch. A page is rendered at ``PageRendering.dpi``, scaled down so its
longer side is at most ``PageRendering.max_side`` pixels: a page with a 200-inch media box costs
the same memory as a letter page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from poolrag.errors import InvalidInputError
from poolrag.pdfium_process import shared_pdfium
from poolrag.tokenization.images import MAX_IMAGE_PIXELS

#: the most pages one PDF may have; a longer one is left out whole, named in the report
MAX_PDF_PAGES = 5000
#: the largest longer side a page may be rendered at: a square page that size is the most pixels
#: the engine reads in one image (8,000)
MAX_PAGE_SIDE = math.isqrt(MAX_IMAGE_PIXELS)


@dataclass(frozen=True)
class PageRendering:
    """How a page becomes pixels; part of every page's chunk id, so a change re-embeds the pages."""

    dpi: int = 150
    max_side: int = 1024

    def __post_init__(self) -> None:
        if not 18 <= self.dpi <= 600:
            raise InvalidInputError(f"page dpi must be between 18 and 600, got {self.dpi}")
        if not 64 <= self.max_side <= MAX_PAGE_SIDE:
            raise InvalidInputError(
                f"page size must be between 64 and {MAX_PAGE_SIDE} pixels, got {self.max_side}"
            )

    @property
    def key(self) -> str:
        return f"pdfium:{self.dpi}dpi:max{self.max_side}"


def read_pdf_pages(path: Path) -> list[str]:
    """The text layer of each page of ``path`` (``""`` for a scanned page), checking that every page
    loads; one ``InvalidInputError`` line when the file cannot be used."""
    if path.stat().st_size == 0:
        raise InvalidInputError("an empty file, not a PDF")
    return [_clean(text) for text in shared_pdfium().page_texts(str(path), MAX_PDF_PAGES)]


def render_page(path: Path, index: int, rendering: PageRendering) -> Any:
    """Page ``index`` (0-based) of ``path`` as an RGB PIL image, within ``rendering``'s bounds."""
    from PIL import Image

    size, pixels = shared_pdfium().render(str(path), index, rendering.dpi, rendering.max_side)
    return Image.frombytes("RGB", size, pixels)


def _clean(text: str) -> str:
    """A page's text as every store keeps it: line ends as ``\\n``, no NUL, no lone surrogate, and
    a word hyphenated at a line end whole again (pdfium drops the hyphen and the line break and
    marks the place with ``\\x02``, which a tokenizer would read as a character inside the word)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "").replace("\x02", "")
    return text.encode("utf-8", "replace").decode("utf-8")
