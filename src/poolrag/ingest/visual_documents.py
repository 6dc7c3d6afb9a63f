"""Image files and PDF pages as documents, for a model that reads images (CLIP, SigLIP).

An image file is one chunk; a PDF is one chunk per page. Each chunk carries what the model reads
(the image file's path, or a reference to the page, rendered only when its batch is embedded, so a
batch in flight holds at most one batch of pages' pixels) and, as its text, the page's text layer
(empty for an image or a scanned page), which search shows and a hybrid collection's sparse leg
indexes. Every payload names the file (``source``, ``filename``), the ``page`` (1-based, PDFs only)
and ``modality: "image"``.

Files are checked when listed (an image decodes within the engine's pixel limit, a PDF opens and
every page loads), so a bad file is left out with one line and the run goes on.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from poolrag.errors import InvalidImageError, InvalidInputError
from poolrag.ingest.chunker import MAX_CHUNK_BYTES, Chunk, chunk_id
from poolrag.ingest.pdf_pages import PageRendering, read_pdf_pages, render_page

logger = logging.getLogger(__name__)

#: the files of every format the engine decodes (:data:`poolrag.tokenization.images.IMAGE_FORMATS`);
#: an animated GIF or a TIFF of several pages is its first frame, as the engine reads it (said in
#: a line when listed); .jfif and .jpe are JPEG's other names
IMAGE_SUFFIXES = (
    ".png",
    ".jpg",
    ".jpeg",
    ".webp",
    ".gif",
    ".bmp",
    ".tif",
    ".tiff",
    ".ico",
    ".avif",
    ".ppm",
    ".pgm",
    ".pbm",
    ".pnm",
    ".jfif",
    ".jpe",
)
PDF_SUFFIXES = (".pdf",)


def file_digest(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


@dataclass(frozen=True)
class ImageFile:
    """An image file, read by the engine itself (it decodes the path)."""

    path: Path

    def load(self) -> Path:
        return self.path


@dataclass(frozen=True)
class PageImage:
    """Page ``index`` of a PDF, rendered when :meth:`load` is called (on the embedding thread)."""

    path: Path
    index: int
    rendering: PageRendering

    def load(self) -> Any:
        return render_page(self.path, self.index, self.rendering)


@dataclass(frozen=True)
class ImageDocument:
    """An image file: one chunk whose model input is the file itself (the engine decodes it).

    ``upright``: the engine turns it by its EXIF orientation. Its chunk id and digest then differ from
    the file's alone, so a collection that holds it as ingested before poolrag read orientations
    (the picture on its side) embeds it again on the next run and drops the old row."""

    source: str
    path: Path
    file_digest: str
    metadata: dict[str, Any] = field(default_factory=dict)
    upright: bool = False

    @property
    def digest(self) -> str:
        return f"{self.file_digest}:upright" if self.upright else self.file_digest

    def chunks(self) -> Iterator[Chunk]:
        kind = "image-upright" if self.upright else "image"
        yield Chunk(
            id=chunk_id(self.source, 0, f"{kind}:{self.file_digest}"),
            source=self.source,
            text="",
            start=0,
            end=0,
            index=0,
            num_tokens=0,
            metadata={**self.metadata, "modality": "image"},
            image=ImageFile(self.path),
        )


@dataclass(frozen=True)
class PdfDocument:
    """A PDF: one chunk per page, its text layer read when listed, its pixels when embedded."""

    source: str
    path: Path
    file_digest: str
    page_texts: tuple[str, ...]
    rendering: PageRendering
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        """The file's bytes and how its pages are rendered: a change to either redoes the document."""
        return f"{self.file_digest}:{self.rendering.key}"

    def chunks(self) -> Iterator[Chunk]:
        for index, text in enumerate(self.page_texts):
            text = _fit(text)
            yield Chunk(
                id=chunk_id(self.source, index, f"page:{self.digest}"),
                source=self.source,
                text=text,
                start=0,
                end=len(text),
                index=index,
                num_tokens=0,
                metadata={**self.metadata, "page": index + 1, "modality": "image"},
                image=PageImage(self.path, index, self.rendering),
            )


VisualDocument = ImageDocument | PdfDocument


def read_visual_file(path: Path, rendering: PageRendering) -> VisualDocument:
    """``path`` (an image or a PDF) as a document, checked; ``InvalidInputError`` says why not."""
    from poolrag.tokenization.images import decode_image, turned_upright

    source = path.resolve().as_posix()
    metadata = {"filename": path.name}
    if path.suffix.lower() in PDF_SUFFIXES:
        pages = read_pdf_pages(path)
        return PdfDocument(source, path, file_digest(path), tuple(pages), rendering, metadata)
    try:
        decode_image(path, "image").close()  # decodes within the engine's pixel limit
    except InvalidImageError as exc:
        raise InvalidInputError(exc.problem) from None
    _say_frames_left_out(path)
    return ImageDocument(
        source, path, file_digest(path), metadata, upright=bool(turned_upright(path, "image"))
    )


def _say_frames_left_out(path: Path) -> None:
    """One line for an image of several frames, of which the engine reads the first: a warning
    for a TIFF's pages (a scanned document's, lost to search), a note for an animation's frames.
    A camera's MPO says nothing: its other frames are the same scene (a stereo view, a preview)."""
    from poolrag.tokenization.images import frames

    kind, count = frames(path, "image")
    if count < 2 or kind == "MPO":
        return
    if kind == "TIFF":
        logger.warning(
            "%s: a TIFF of %d pages; only its first page is read (%d left out)", path, count, count - 1
        )
    else:
        logger.info(
            "%s: an animation of %d frames; only its first frame is read (%d left out)",
            path,
            count,
            count - 1,
        )


def _fit(text: str) -> str:
    """A page's text within the bytes every store keeps for a chunk (cut at a character)."""
    data = text.encode("utf-8")
    if len(data) <= MAX_CHUNK_BYTES:
        return text
    return data[:MAX_CHUNK_BYTES].decode("utf-8", "ignore")
