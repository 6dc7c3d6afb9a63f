"""A PDF as a text model reads it: its text layer, one document whose chunks name their page.

The pages' texts are joined by a blank line, so a paragraph that runs over a page break is chunked
as the text it is, and each chunk's payload gets the ``page`` its text starts on (from 1), the
citation a RAG answer shows. pdfium reads the text in its bounded child process, as for a page
retriever (:mod:`poolrag.ingest.pdf_pages`); only ``pypdfium2`` is needed (the ``pdf`` extra), not Pillow.
A PDF without a text layer (scanned pages) is one line in the report naming the models that read
its pages instead.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from poolrag.errors import InvalidInputError
from poolrag.ingest.pdf_pages import read_pdf_pages
from poolrag.ingest.readers import Document, parsed_document

PAGE_BREAK = "\n\n"
#: the reason each PDF is left out with when pypdfium2 is not installed
PDF_TEXT_EXTRA = 'reading a PDF\'s text needs pypdfium2: pip install "poolrag[pdf]"'


def read_pdf_text(path: Path) -> Document:
    """``path``'s text layer as a :class:`Document` with its page starts; ``InvalidInputError`` says
    why the file cannot be used (no pypdfium2, not a PDF, no text)."""
    if importlib.util.find_spec("pypdfium2") is None:
        raise InvalidInputError(PDF_TEXT_EXTRA)
    pages = read_pdf_pages(path)
    starts, offset = [], 0
    for text in pages:
        starts.append(offset)
        offset += len(text) + len(PAGE_BREAK)
    no_text = "no text layer (scanned pages): a model that reads images (CLIP, ColPali) reads its pages"
    return parsed_document(path, PAGE_BREAK.join(pages), no_text, page_starts=tuple(starts))
