"""Document readers: text and Markdown files, JSONL and CSV records, the text of web pages, Word
documents, PowerPoint decks and PDFs, and any Python iterable of documents.

Every document gets a ``source`` that names it across runs (the resolved file path, plus a JSONL
or CSV record's id or line number, or the caller's own id), because chunk ids derive from it.

Text files are never held whole: a :class:`FileDocument` is checked (UTF-8, readable) and hashed in
one streaming pass when it is listed, and read again in pieces that end at paragraph breaks when it
is chunked, so a 50 MB file costs a few MB of memory. A file that cannot be read is a per-file
problem: with a ``skipped`` list it is recorded there and the run goes on, without one it raises.
FIFOs, sockets and devices are never opened (reading a FIFO would block forever).
"""

from __future__ import annotations

import codecs
import fnmatch
import hashlib
import json
import logging
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from poolrag.errors import InvalidInputError
from poolrag.ingest.first_met import FirstMet
from poolrag.ingest.record_rules import NotARecord, metadata_problem, string_problem
from poolrag.printable import printable
from poolrag.text_validity import has_visible_text, text_problem

if TYPE_CHECKING:
    from poolrag.ingest.pdf_pages import PageRendering
    from poolrag.ingest.visual_documents import VisualDocument

logger = logging.getLogger(__name__)

TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".rst")
JSONL_SUFFIXES = (".jsonl",)
CSV_SUFFIXES = (".csv",)
HTML_SUFFIXES = (".html", ".htm")
DOCX_SUFFIXES = (".docx",)
PPTX_SUFFIXES = (".pptx",)
#: what a text model reads besides PDFs (which a model that reads images reads as pages)
DOCUMENT_SUFFIXES = (
    TEXT_SUFFIXES + JSONL_SUFFIXES + CSV_SUFFIXES + HTML_SUFFIXES + DOCX_SUFFIXES + PPTX_SUFFIXES
)
#: how a table row's cells are joined where a web page or Word document becomes text
CELL_SEPARATOR = " | "
PIECE_CHARS = 1 << 18  # characters per piece read from a file (256 Ki: about 60k tokens)
_READ_BYTES = 1 << 20


def _digest_of(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def split_pieces(text: str, size: int) -> Iterator[str]:
    """``text`` in pieces of about ``size`` characters, each ending after a paragraph break (else
    after whitespace, else at ``size``), so that no word and, where possible, no paragraph is cut."""
    start = 0
    while len(text) - start > size:
        cut = _cut(text, start, start + size)
        yield text[start:cut]
        start = cut
    if start < len(text):
        yield text[start:]


def _cut(text: str, lo: int, hi: int) -> int:
    """A cut in ``text[lo:hi]``: after the whitespace run holding the last blank line, else the last
    line end, else the last space; ``hi`` when there is none (a word over a piece long)."""
    for sep in ("\n\n", "\n", " "):
        k = text.rfind(sep, lo, hi)
        if k > lo:
            end = k + len(sep)
            while end < len(text) and text[end].isspace():
                end += 1  # the whole whitespace run stays in this piece
            return end
    return hi


@dataclass(frozen=True)
class Document:
    """One text to ingest; ``metadata`` is copied into every chunk's payload."""

    source: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    #: Where each page of a paged text (a PDF's text layer) starts in ``text``: each chunk's payload
    #: then names the ``page`` (from 1) its text starts on, as a citation needs.
    page_starts: tuple[int, ...] = ()

    @property
    def digest(self) -> str:
        """SHA-256 of the text (and its page starts): the checkpoint's proof that a document is
        unchanged."""
        if self.page_starts:
            return _digest_of(f"{self.text}\x00{','.join(map(str, self.page_starts))}")
        return _digest_of(self.text)

    def pieces(self, size: int = PIECE_CHARS) -> Iterator[str]:
        return split_pieces(self.text, size)


@dataclass(frozen=True)
class FileDocument:
    """A text file (UTF-8, or UTF-16 / UTF-32 opened by their byte-order mark, as Notepad's
    "Unicode" and PowerShell's ``>`` write them), read in pieces when chunked; ``digest`` was
    taken when it was listed."""

    source: str
    path: Path
    digest: str
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The whole text (late chunking reads it whole; chunking reads :meth:`pieces`)."""
        return self.path.read_text(encoding=text_encoding(self.path))

    def pieces(self, size: int = PIECE_CHARS) -> Iterator[str]:
        carry = ""
        with self.path.open(encoding=text_encoding(self.path)) as handle:
            while block := handle.read(size):
                carry += block
                while len(carry) > size:
                    cut = _cut(carry, 0, size)
                    if cut >= len(carry):
                        break  # the whitespace run may go on in the next block
                    yield carry[:cut]
                    carry = carry[cut:]
        if carry:
            yield carry


def parsed_document(
    path: Path, text: str, no_text: str, title: str = "", page_starts: tuple[int, ...] = ()
) -> Document:
    """The text parsed out of a file's format (a web page, a Word document, a deck, a PDF's text
    layer) as a :class:`Document` named by its resolved path, with its ``title`` (if any) in the
    metadata; ``no_text`` is the ``InvalidInputError`` of a file that shows none."""
    if not has_visible_text(text):
        raise InvalidInputError(no_text)
    metadata = {"filename": path.name, **({"title": title} if title else {})}
    return Document(path.resolve().as_posix(), text, metadata, page_starts)


@dataclass(frozen=True)
class SkippedFile:
    """A file (or a JSONL or CSV record) left out of a run, and why."""

    path: str
    reason: str
    line: int | None = None  # of a JSONL or CSV record

    def __str__(self) -> str:
        where = printable(self.path) if self.line is None else f"{printable(self.path)}:{self.line}"
        return f"{where}: {self.reason}"


class _LeftOutAtOnce(InvalidInputError):
    """A file or record left out where no ``skipped`` list collects them (``--fail-fast``): its
    message already names the file and line, so whoever reads the file lets it pass as it is."""


def excluded(relative: str, patterns: Sequence[str]) -> bool:
    """Whether a file or folder at ``relative`` (to the folder given, ``/``-separated) is left out
    by one of ``patterns``, as ``.gitignore`` reads them: a pattern without ``/`` (``node_modules``,
    ``*.log``) matches a name at any depth, one with ``/`` (``drafts/2023/*``) the path from the
    folder given; a trailing ``/`` matches folders only (the caller passes ``relative + "/"``)."""
    name = relative.rstrip("/").rsplit("/", 1)[-1]
    for pattern in patterns:
        folder_only = pattern.endswith("/")
        if folder_only and not relative.endswith("/"):
            continue
        bare = pattern.rstrip("/")
        if fnmatch.fnmatchcase(name if "/" not in bare else relative.rstrip("/"), bare.lstrip("/")):
            return True
    return False


class ExcludedFiles:
    """Which files the ``exclude`` patterns leave out of the folders given (the run's own rule,
    :func:`excluded`, asked again of a stored source's path after the run): a file an earlier run
    stored that this run excluded is still stored and searched until ``prune``, which a run says,
    as it says of a file gone from disk. A file reached through a symlinked folder is not told."""

    def __init__(self, paths: Sequence[Any], patterns: Sequence[str]) -> None:
        self._patterns = tuple(patterns)
        self._folders = [os.path.realpath(raw) for raw in paths if patterns and os.path.isdir(raw)]

    def __call__(self, path: str) -> bool:
        """Whether the file at ``path`` (resolved) lies under a folder given and is excluded there,
        itself or a folder above it."""
        for folder in self._folders:
            if not path.startswith(f"{folder.rstrip('/')}/"):
                continue
            parts = Path(path).relative_to(folder).as_posix().split("/")
            above = ["/".join(parts[: i + 1]) + "/" for i in range(len(parts) - 1)]
            if any(excluded(relative, self._patterns) for relative in [*above, "/".join(parts)]):
                return True
        return False


def _walk(
    path: Path, unlisted: Callable[[OSError], None], suffixes: tuple[str, ...], exclude: Sequence[str]
) -> Iterator[Path]:
    """The files under ``path`` whose names end in ``suffixes`` and that ``exclude`` leaves in
    (:func:`excluded`); a folder that cannot be listed goes to ``unlisted`` (so it is reported as
    skipped, and ``--prune`` keeps what it stored before), never silently dropped. Symlinked
    folders are followed like symlinked files, each real folder once (no loops)."""
    if not path.is_dir():
        yield path  # a file, a symlink, a FIFO...: judged by _check (named, it is not excluded)
        return
    listed: set[str] = set()
    for root, dirs, files in os.walk(path, onerror=unlisted, followlinks=True):
        real = os.path.realpath(root)
        if real in listed:
            dirs[:] = []
            continue
        listed.add(real)
        here = Path(root).relative_to(path).as_posix()
        prefix = "" if here == "." else here + "/"
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not excluded(f"{prefix}{d}/", exclude))
        for name in dirs:
            if os.path.islink(link := os.path.join(root, name)):
                logger.info("following the folder link %s -> %s", link, os.path.realpath(link))
        for name in sorted(files):
            if name.startswith(".") or not name.lower().endswith(suffixes):
                continue
            if not excluded(prefix + name, exclude):
                yield Path(root) / name


def changed_since_listed(exc: OSError | UnicodeDecodeError) -> str:
    """Why a file that was readable when listed failed when read (deleted, or rewritten)."""
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text ({exc.reason}): it changed after it was listed"
    return f"cannot read: {_describe(exc)} (it changed after it was listed)"


def _describe(exc: OSError) -> str:
    if exc.errno == 40:  # ELOOP
        return "symlink loop"
    return exc.strerror or str(exc)


def _check(file: Path) -> str | None:
    """Why ``file`` cannot be read as a regular file (or named in a store: its path is every
    document's source), or ``None`` when it can be opened."""
    if (problem := string_problem(str(file), "the file's path")) is not None:
        return problem  # a name that is not UTF-8 (os.fsdecode made its bytes lone surrogates)
    try:
        mode = os.stat(file).st_mode
    except FileNotFoundError:
        return "broken symlink (its target does not exist)" if file.is_symlink() else "no such file"
    except OSError as exc:
        return _describe(exc)
    if stat.S_ISDIR(mode):
        return "is a folder, not a file"
    if not stat.S_ISREG(mode):
        kind = "FIFO" if stat.S_ISFIFO(mode) else "socket" if stat.S_ISSOCK(mode) else "device"
        return f"not a regular file ({kind})"
    return None


_BYTE_ORDER_MARKS = (  # UTF-32's first: its little-endian mark begins with UTF-16's
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def marked_encoding(head: bytes) -> str | None:
    """``utf-16`` / ``utf-32`` when ``head`` (a file's first bytes) starts with their byte-order
    mark, else ``None``: a mark names its encoding for certain, where guessing any other (Latin-1,
    a code page) is not."""
    return next((name for mark, name in _BYTE_ORDER_MARKS if head.startswith(mark)), None)


def text_encoding(path: Path) -> str:
    """The encoding a text file is read in: the one its mark names (:func:`marked_encoding`), else
    ``utf-8``."""
    with path.open("rb") as handle:
        return marked_encoding(handle.read(4)) or "utf-8"


def records_encoding(path: Path) -> str:
    """The encoding a JSONL or CSV file is read in: the one its mark names (PowerShell 5's ``>``
    and Excel's "Unicode Text" write UTF-16), else UTF-8 with its mark, if any, skipped."""
    encoding = text_encoding(path)
    return "utf-8-sig" if encoding == "utf-8" else encoding


def _scan_text(path: Path) -> tuple[str, bool]:
    """SHA-256 of the file's bytes and whether it holds any visible text, checking on the way that
    they decode (:func:`text_encoding`) and hold no NUL character: NUL is valid text but no text
    file has one, while binary data (a file named .txt by mistake) and UTF-16 without its mark are
    full of them, and would be embedded as garbage."""
    encoding = text_encoding(path)
    decoder = codecs.getincrementaldecoder(encoding)()
    digest = hashlib.sha256()
    read = 0
    visible = False
    with path.open("rb") as handle:
        while block := handle.read(_READ_BYTES):
            # NUL is looked for before the bytes are decoded: binary data is seldom UTF-8 either,
            # and "binary" says more than the first byte UTF-8 refuses
            nul = block.find(b"\x00") if encoding == "utf-8" else -1
            text = decoder.decode(block) if nul < 0 else ""
            if nul >= 0 or (nul := text.find("\x00")) >= 0:
                why = f"a NUL byte at {read + nul}: binary, or UTF-16 without its byte-order mark"
                raise UnicodeDecodeError(encoding, block, nul, nul + 1, why)
            visible = visible or has_visible_text(text)
            read += len(block)
            digest.update(block)
        decoder.decode(b"", final=True)
    return digest.hexdigest(), visible


def _jsonl_records(path: Path, text_field: str) -> Iterator[tuple[int, object]]:
    """``(line, record)`` for each non-blank line of a JSONL file (read in the encoding its
    byte-order mark names, which Notepad and PowerShell 5 write: :func:`records_encoding`)."""
    with path.open(encoding=records_encoding(path)) as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as exc:
                yield number, NotARecord(f"not valid JSON ({exc.msg})")


def _records_of(suffix: str) -> Callable[[Path, str], Iterator[tuple[int, object]]] | None:
    """The reader of a file of records (JSONL lines, CSV rows), or ``None``."""
    if suffix in JSONL_SUFFIXES:
        return _jsonl_records
    if suffix in CSV_SUFFIXES:
        from poolrag.ingest.csv_rows import csv_records

        return csv_records
    return None


def _read_records(
    path: Path, records: Iterator[tuple[int, object]], text_field: str, problem: Any
) -> Iterator[Document]:
    """One document per record: its ``text_field`` the text, ``id`` (else ``_id``, else its line)
    naming it, its other scalar fields the payload; a bad record is left out alone."""
    first = FirstMet()  # a source's first record (line, named): a repeat is the later one's problem
    with closing(first):
        number = 0
        for number, record in records:
            if isinstance(record, NotARecord):
                problem(path, record.reason, number)
                continue
            if not isinstance(record, dict) or not isinstance(record.get(text_field), str):
                problem(path, f"expected an object with a string {text_field!r} field", number)
                continue
            text = record.pop(text_field)
            unreadable = text_problem(text)
            if unreadable is not None:  # this record only: the records after it are still read
                problem(path, f"{text_field!r} {unreadable}", number)
                continue
            id_field = "id"
            ident = record.pop("id", None)
            if ident is None:  # BEIR's corpus.jsonl names its records _id
                id_field, ident = "_id", record.pop("_id", None)
            metadata = {k: v for k, v in record.items() if _is_scalar(v)}
            bad = string_problem(str(ident), repr(id_field)) if ident is not None else None
            if (bad := bad or metadata_problem(metadata)) is not None:  # this record only, as above
                problem(path, bad, number)
                continue
            source = f"{path.resolve().as_posix()}#{ident if ident is not None else number}"
            if (earlier := first.earlier(source, number, ident is not None)) is not None:
                problem(path, _repeat(ident, number, *earlier), number)
                continue
            yield Document(source, text, metadata)
    if not number:  # named as an empty text file is; still read: its old records are deleted
        what = (
            "rows (empty, or a header only)"
            if path.suffix.lower() in CSV_SUFFIXES
            else "records (empty, or only blank lines)"
        )
        logger.warning("%s has no %s: it adds no chunks", path, what)


def _repeat(ident: object, number: int, first_number: int, first_named: bool) -> str:
    """Why a record's source repeats an earlier one's (a record without an id is named by its line)."""
    if ident is not None and first_named:
        return f"id {ident!r} again (first on line {first_number})"
    if ident is None:
        return f"no id, and its line number {number} is the id of line {first_number}: give it an id"
    return f"id {ident!r} is the line number of line {first_number}, which has no id: give that one an id"


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) or value is None


class PathDocuments(Iterator[Any]):
    """What :func:`read_paths` gives: its documents, read lazily, and its ``skipped`` list, which
    :meth:`~poolrag.ingest.IngestPipeline.run` reads when it is given none, so ``prune`` keeps a
    skipped file's chunks without the list being passed twice. ``record_files``: the JSONL and CSV
    files read to their end (resolved paths), whose records no longer in them the run deletes, as
    it deletes an edited document's old chunks. ``excluded``: which stored files the ``exclude``
    patterns left out (:class:`ExcludedFiles`)."""

    def __init__(
        self,
        documents: Iterator[Any],
        skipped: Sequence[SkippedFile],
        record_files: list[str],
        excluded: ExcludedFiles | None = None,
    ) -> None:
        self._documents = documents
        self.skipped = skipped
        self.record_files = record_files
        self.excluded = excluded if excluded is not None else ExcludedFiles((), ())

    def __next__(self) -> Document | FileDocument | VisualDocument:
        return next(self._documents)


def read_paths(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    text_field: str = "text",
    skipped: list[SkippedFile] | None = None,
    images: PageRendering | None = None,
    texts: bool = True,
    exclude: Sequence[str] = (),
) -> PathDocuments:
    """Documents from files and folders (recursively: .txt, .md, .markdown, .rst, .jsonl, .csv,
    .html, .htm, .docx, .pptx, .pdf),
    with the files left out in ``.skipped`` (the list given as ``skipped``).

    Args:
        images: for a model that reads images: image files (.png, .jpg/.jpeg/.jfif/.jpe, .webp, .gif,
            .bmp, .tif, .tiff, .ico, .avif and .ppm/.pgm/.pbm/.pnm: every format the engine decodes) are
            read too (a TIFF of several pages, or an animation, is its first frame: said in a line),
            and a PDF's pages are rendered this way (:mod:`~poolrag.ingest.visual_documents`);
            without it a PDF is its text layer (:mod:`~poolrag.ingest.pdf_text`).
        texts: text, JSONL, CSV, HTML, Word and PowerPoint files are read (``False`` for a page
            retriever, which reads pages); a web page is its visible text
            (:mod:`~poolrag.ingest.html_text`), a Word document its paragraphs and tables
            (:mod:`~poolrag.ingest.docx_text`), a PowerPoint deck its slides' text and notes
            (:mod:`~poolrag.ingest.pptx_text`).
        exclude: files and folders under a folder given that are not read, as ``.gitignore``
            patterns (``node_modules``, ``*.log``, ``drafts/``: :func:`excluded`); ``prune`` deletes
            what they stored, as it does for a deleted file.
        skipped: where per-file problems go (unreadable or non-UTF-8 files, broken symlinks, bad
            JSONL lines or CSV rows); those files are left out and the rest is read. ``None`` raises instead.
            Non-regular files (FIFOs, sockets, devices) are always left out, with a warning.

    Raises:
        InvalidInputError: a path that does not exist; with ``skipped=None``, any per-file problem.
    """
    record_files: list[str] = []
    paths = _path_list(paths)
    return PathDocuments(
        _read_paths(paths, text_field, skipped, images, texts, record_files, tuple(exclude)),
        () if skipped is None else skipped,
        record_files,
        ExcludedFiles(paths, exclude),
    )


def _read_paths(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    text_field: str,
    skipped: list[SkippedFile] | None,
    images: PageRendering | None,
    texts: bool,
    record_files: list[str],
    exclude: tuple[str, ...],
) -> Iterator[Document | FileDocument | VisualDocument]:
    def problem(where: Path, reason: str, line: int | None = None, *, fatal: bool = True) -> None:
        item = SkippedFile(str(where), reason, line)
        if skipped is None and fatal:
            raise _LeftOutAtOnce(str(item))
        logger.warning("skipping %s", item)
        if skipped is not None:
            skipped.append(item)

    def unlisted(exc: OSError) -> None:
        problem(Path(exc.filename), f"cannot list the folder: {_describe(exc)}")

    suffixes = _suffixes(images is not None, texts)
    paths = _path_list(paths)
    for raw in paths:  # every path checked before any is read: a typo stops the run before it writes
        if not Path(raw).exists() and not Path(raw).is_symlink():
            raise InvalidInputError(f"no such file or folder: {raw}")
    # a file named twice (a symlink and its target, overlapping paths) is one document
    with closing(FirstMet()) as read:
        for raw in paths:
            for file in _walk(Path(raw), unlisted, suffixes, exclude):
                reason = _check(file)
                if reason is not None:
                    problem(file, reason, fatal=not reason.startswith("not a regular file"))
                    continue
                if not read.first_time(real := file.resolve()):
                    logger.info("%s is %s, read already", file, real)
                    continue
                yield from _read_file(file, real, text_field, images, record_files, problem)


def _read_file(
    file: Path,
    real: Path,
    text_field: str,
    images: PageRendering | None,
    record_files: list[str],
    problem: Callable[[Path, str], None],
) -> Iterator[Document | FileDocument | VisualDocument]:
    """An image or PDF as pages for a model that reads ``images``, a records file's documents
    (``real`` goes to ``record_files`` once all are read), a parsed file's document, or a text
    file's; a file that cannot be read goes to ``problem``."""
    from poolrag.ingest.visual_documents import IMAGE_SUFFIXES, PDF_SUFFIXES, read_visual_file

    suffix = file.suffix.lower()
    try:
        if images is not None and suffix in IMAGE_SUFFIXES + PDF_SUFFIXES:
            yield read_visual_file(file, images)
            return
        if (records := _records_of(suffix)) is not None:
            yield from _read_records(file, records(file, text_field), text_field, problem)
            record_files.append(real.as_posix())
            return
        if (parse := _parser_of(suffix)) is not None:
            yield parse(file)
            return
        digest, visible = _scan_text(file)
    except _LeftOutAtOnce:  # a record of it, named with its line (not "path: path:3: ...")
        raise
    except UnicodeDecodeError as exc:
        problem(file, _not_text(file, exc, images is not None))
        return
    except InvalidInputError as exc:  # a PDF pdfium cannot read, a bad image, no text
        problem(file, str(exc))
        return
    except OSError as exc:
        problem(file, f"cannot read: {_describe(exc)}")
        return
    if not visible:  # still read: a file emptied since the last run loses its old chunks
        warn_no_text(str(file))
    yield FileDocument(real.as_posix(), file, digest, {"filename": file.name})


def warn_no_text(source: str) -> None:
    """Name a document that cuts into no chunk (its text empty, whitespace or invisible characters
    only), which would otherwise be left out unsaid."""
    logger.warning("%s has no text (empty, or only whitespace): it adds no chunks", source)


def _parser_of(suffix: str) -> Callable[[Path], Document] | None:
    """The reader of a file whose text is not its bytes (a PDF's text layer, a web page's or a
    Word document's text), imported when such a file is met; ``None`` for a plain text file."""
    from poolrag.ingest.visual_documents import PDF_SUFFIXES

    if suffix in PDF_SUFFIXES:
        from poolrag.ingest.pdf_text import read_pdf_text as parse
    elif suffix in HTML_SUFFIXES:
        from poolrag.ingest.html_text import read_html_text as parse
    elif suffix in DOCX_SUFFIXES:
        from poolrag.ingest.docx_text import read_docx_text as parse
    elif suffix in PPTX_SUFFIXES:
        from poolrag.ingest.pptx_text import read_pptx_text as parse
    else:
        return None
    return parse


#: picture formats the engine does not decode (a named file of one is read as text)
_OTHER_IMAGE_SUFFIXES = (".heic", ".heif", ".jxl", ".psd")


def _not_text(file: Path, exc: UnicodeDecodeError, reads_images: bool) -> str:
    """Why a file read as text is left out: its bytes, or, for a picture or a PDF, what to do."""
    from poolrag.ingest.visual_documents import IMAGE_SUFFIXES, PDF_SUFFIXES

    suffix = file.suffix.lower()
    if suffix in IMAGE_SUFFIXES and not reads_images:
        return f"a {suffix} file, which this model cannot read (it reads text; CLIP or ColPali read images)"
    if suffix in _OTHER_IMAGE_SUFFIXES:
        kinds = ", ".join(IMAGE_SUFFIXES + PDF_SUFFIXES)
        return f"a {suffix} picture: ingest reads {kinds} (convert it to one of them)"
    if suffix in CSV_SUFFIXES:  # Excel's plain "CSV" is the Windows code page
        return f"not UTF-8 text ({exc.reason}): save it as CSV UTF-8"
    if exc.encoding != "utf-8":
        return f"not {exc.encoding.upper()} text ({exc.reason})"
    if "NUL byte" in exc.reason:
        return f"not UTF-8 text ({exc.reason})"
    return f"not UTF-8 text ({exc.reason}): save it as UTF-8 (Latin-1 and Windows code pages are not guessed)"


def _suffixes(images: bool, texts: bool, pdfs: bool = True) -> tuple[str, ...]:
    """The files listed: texts, images, and PDFs (read as pages by an image model, else as text)."""
    from poolrag.ingest.visual_documents import IMAGE_SUFFIXES, PDF_SUFFIXES

    return (
        (DOCUMENT_SUFFIXES if texts else ())
        + (IMAGE_SUFFIXES if images else ())
        + (PDF_SUFFIXES if pdfs and (images or texts) else ())
    )


def _path_list(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[Any]:
    """One path given alone is one path, not its characters (``read_paths("docs")``)."""
    return [paths] if isinstance(paths, str | os.PathLike) else list(paths)


def count_documents(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    images: bool = False,
    texts: bool = True,
    pdfs: bool = True,
    exclude: Sequence[str] = (),
    unlisted_folders: bool = True,
) -> int:
    """How many entries :func:`read_paths` gives for ``paths``, each a document or a left-out file
    or record: one per text, HTML, Word, PowerPoint or PDF file (``pdfs=False`` leaves them out of
    the count), one per record of a JSONL or CSV file, one per file or folder that cannot be read.
    Files are only listed and record files' records counted, so that a progress bar starts at its
    total before the run; an unreadable record file counts the records read before the problem,
    and the problem, as :func:`read_paths` reports them. ``unlisted_folders=False`` counts files
    alone: a folder that cannot be listed is of no kind (it is not "1 image file")."""
    count = 0
    counted = FirstMet()

    def unlisted(exc: OSError) -> None:
        nonlocal count
        count += 1 if unlisted_folders else 0

    suffixes = _suffixes(images, texts, pdfs)
    with closing(counted):
        for raw in _path_list(paths):
            for file in _walk(Path(raw), unlisted, suffixes, tuple(exclude)):
                if not texts and file.suffix.lower() not in suffixes:
                    continue  # a file named on its own, of a kind this count leaves out
                if _check(file) is not None:
                    count += 1
                    continue
                if counted.first_time(file.resolve()):
                    count += _entries(file)
    return count


def _entries(path: Path) -> int:
    """The records a JSONL or CSV file gives (non-blank lines, rows with a filled cell), each a
    document or a left-out record, read as :func:`_read_records` reads them; a file that stops
    reading adds its one problem. Any other file is one entry."""
    suffix = path.suffix.lower()
    if suffix not in JSONL_SUFFIXES + CSV_SUFFIXES:
        return 1
    entries = 0
    try:
        if suffix in CSV_SUFFIXES:
            from poolrag.ingest.csv_rows import csv_records

            for _ in csv_records(path, ""):
                entries += 1
        else:
            with path.open(encoding=records_encoding(path)) as handle:
                for line in handle:
                    entries += bool(line.strip())
    except (UnicodeDecodeError, OSError):
        return entries + 1
    return entries


def from_iterable(items: Iterable[Document | str | tuple[str, str] | dict[str, Any]]) -> Iterator[Document]:
    """Documents from Python objects: ``Document``, ``(source, text)``, ``{"source", "text", ...}``.

    Bare strings get ``source`` = ``"item-<n>"``; give real sources when re-running matters.
    """
    for number, item in enumerate(items):
        if isinstance(item, Document):
            yield item
        elif isinstance(item, str):
            yield Document(f"item-{number}", item)
        elif isinstance(item, tuple) and len(item) == 2:
            yield Document(str(item[0]), str(item[1]))
        elif isinstance(item, dict) and isinstance(item.get("text"), str):
            data = dict(item)
            text = data.pop("text")
            source = str(data.pop("source", data.pop("id", f"item-{number}")))
            yield Document(source, text, {k: v for k, v in data.items() if _is_scalar(v)})
        else:
            raise InvalidInputError(
                f"document {number}: expected a Document, str, (source, text) or dict with 'text'"
            )
