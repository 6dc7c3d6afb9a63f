"""pdfium in a child process of its own, with bounded memory and time.

A PDF is a program of sorts: a 1 MB file can inflate to gigabytes of page content, and pdfium has no
limit to set. So pdfium never runs in the caller's process: one child (``python -m
poolrag.pdfium_process``, importing only pypdfium2 and Pillow) reads and renders every PDF, under
an address-space limit (``resource.RLIMIT_AS``) set before pdfium loads. A file that needs more, or
that crashes pdfium, or that takes longer than ``CALL_SECONDS`` for one call, costs that child (the
next call starts a new one) and is one ``InvalidInputError`` line about that file. The child also
serialises pdfium, which is not thread-safe.

The two talk in frames of a JSON header and raw bytes (a rendered page's pixels): nothing that
crosses is code or picks code to run.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import struct
import subprocess
import sys
import threading
import weakref
from typing import Any, BinaryIO

from poolrag.errors import InvalidInputError, ModelLoadError

#: the child's address space: room for a 64-megapixel page image three times over, and Python
MEMORY_LIMIT_BYTES = 1 << 30
#: the longest one call (reading a PDF's pages, rendering a page) may take
CALL_SECONDS = 120.0
PDF_EXTRA = 'PDF pages need pypdfium2: pip install "poolrag[images]"'
_HEADER = struct.Struct(">II")  # JSON header length, payload length


def _send(stream: BinaryIO, header: dict[str, Any], payload: bytes = b"") -> None:
    data = json.dumps(header).encode()
    stream.write(_HEADER.pack(len(data), len(payload)) + data + payload)
    stream.flush()


def _read_exactly(stream: BinaryIO, size: int) -> bytes:
    parts: list[bytes] = []
    while size:
        part = stream.read(size)
        if not part:
            raise EOFError
        parts.append(part)
        size -= len(part)
    return b"".join(parts)


def _receive(stream: BinaryIO) -> tuple[dict[str, Any], bytes]:
    header_size, payload_size = _HEADER.unpack(_read_exactly(stream, _HEADER.size))
    header = json.loads(_read_exactly(stream, header_size))
    return header, _read_exactly(stream, payload_size)


class PdfiumProcess:
    """The parent's handle on the pdfium child; one call at a time (a lock), restarted after a loss.
    A forked process starts a child of its own at its first PDF."""

    def __init__(self, memory_limit: int = MEMORY_LIMIT_BYTES, call_seconds: float = CALL_SECONDS) -> None:
        self.memory_limit = memory_limit
        self.call_seconds = call_seconds
        self._lock = threading.Lock()
        self._child: subprocess.Popen[bytes] | None = None
        _HANDLES.add(self)

    def page_texts(self, path: str, max_pages: int) -> list[str]:
        """Every page's text layer, each page loaded (``InvalidInputError`` when one cannot be)."""
        header, _ = self._call({"op": "texts", "path": os.path.abspath(path), "max_pages": max_pages})
        return list(header["texts"])

    def render(self, path: str, index: int, scale_dpi: float, max_side: int) -> tuple[tuple[int, int], bytes]:
        """Page ``index`` as RGB pixels: ``((width, height), bytes)``."""
        header, pixels = self._call(
            {
                "op": "render",
                "path": os.path.abspath(path),
                "index": index,
                "dpi": scale_dpi,
                "max_side": max_side,
            }
        )
        return (int(header["width"]), int(header["height"])), pixels

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _call(self, request: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        with self._lock:
            child = self._started()
            assert child.stdin is not None and child.stdout is not None
            try:
                _send(child.stdin, request)
                ready, _, _ = select.select([child.stdout], [], [], self.call_seconds)
                if not ready:
                    self._stop()
                    raise InvalidInputError(f"pdfium took longer than {self.call_seconds:.0f} s on it")
                header, payload = _receive(child.stdout)
            except (EOFError, BrokenPipeError):
                self._stop()
                raise InvalidInputError(
                    f"pdfium stopped on it (it needs more than {self.memory_limit >> 20:,} MiB, "
                    "a compression bomb, or it crashed pdfium)"
                ) from None
            if header.get("new_child"):
                self._stop()
        if "error" in header:
            if header.get("missing_extra"):
                raise ModelLoadError(PDF_EXTRA)
            raise InvalidInputError(str(header["error"]))
        return header, payload

    def _started(self) -> subprocess.Popen[bytes]:
        if self._child is None or self._child.poll() is not None:
            self._child = subprocess.Popen(
                [sys.executable, "-m", "poolrag.pdfium_process", str(self.memory_limit)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,  # pdfium's own words on an abort; the caller gets one line
                env={**os.environ, "OMP_NUM_THREADS": "1"},
            )
        return self._child

    def _leave_parents_child(self) -> None:
        """In a forked process: the pdfium child is the parent's (its pipes are shared with it) and the
        lock may be held by a thread that does not exist here; start afresh, leaving both to the parent."""
        self._lock = threading.Lock()
        self._child = None

    def _stop(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            child.kill()
            child.wait()
            for stream in (child.stdin, child.stdout):
                if stream is not None:
                    stream.close()


#: every live handle, for the fork handler
_HANDLES: weakref.WeakSet[PdfiumProcess] = weakref.WeakSet()
_SHARED: PdfiumProcess | None = None
_SHARED_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    global _SHARED_LOCK
    _SHARED_LOCK = threading.Lock()
    for handle in list(_HANDLES):
        handle._leave_parents_child()


os.register_at_fork(after_in_child=_after_fork_in_child)


def shared_pdfium() -> PdfiumProcess:
    """The process-wide pdfium child (started on first use)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = PdfiumProcess()
            atexit.register(_SHARED.close)
        return _SHARED


# -- the child ----------------------------------------------------------------------------------------
def _texts(pdfium: Any, request: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    document = pdfium.PdfDocument(request["path"])
    try:
        count = len(document)
        if count == 0:
            return {"error": "the PDF has no pages"}, b""
        if count > request["max_pages"]:
            return {"error": f"the PDF has {count:,} pages, more than {request['max_pages']:,}"}, b""
        texts = []
        for index in range(count):
            page = document[index]
            width, height = page.get_size()
            if not (width > 0 and height > 0):
                return {"error": f"page {index + 1} has no area ({width}x{height} points)"}, b""
            textpage = page.get_textpage()
            texts.append(textpage.get_text_bounded())
            textpage.close()
            page.close()
        return {"texts": texts}, b""
    finally:
        document.close()


def _render(pdfium: Any, request: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    document = pdfium.PdfDocument(request["path"])
    try:
        page = document[request["index"]]
        width, height = page.get_size()
        scale = min(request["dpi"] / 72.0, request["max_side"] / max(width, height, 1.0))
        bitmap = page.render(scale=scale, rev_byteorder=True)  # RGB rows, not BGR to convert
        size = {"width": bitmap.width, "height": bitmap.height}
        pixels = _rgb_bytes(bitmap)
        bitmap.close()
        page.close()
        return size, pixels
    finally:
        document.close()


def _rgb_bytes(bitmap: Any) -> bytes:
    """The bitmap's pixels as packed RGB rows in one copy: a PIL image and its conversion would
    hold three more copies of a large page (8000 x 8000 is 192 MB each), past the memory limit."""
    if bitmap.n_channels != 3:  # pypdfium2 gave another layout: let Pillow convert it
        return bitmap.to_pil().convert("RGB").tobytes()
    row, stride = bitmap.width * 3, bitmap.stride
    buffer = memoryview(bitmap.buffer).cast("B")
    if stride == row:
        return bytes(buffer)
    return b"".join(buffer[i * stride : i * stride + row] for i in range(bitmap.height))


def _serve(memory_limit: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but frames on the pipe
    try:
        import pypdfium2 as pdfium
    except ImportError:
        pdfium = None
    while True:
        try:
            request, _ = _receive(stdin)
        except EOFError:
            return
        if pdfium is None:
            _send(stdout, {"error": PDF_EXTRA, "missing_extra": True})
            continue
        try:
            header, payload = (_texts if request["op"] == "texts" else _render)(pdfium, request)
        except pdfium.PdfiumError as exc:
            # pdfium keeps its last error code until another error replaces it, so a later file's
            # failure could read as this one's: the parent starts a new child for the next file
            why = (
                str(exc) if getattr(exc, "err_code", None) else "pdfium cannot load it: no pages, or damaged"
            )
            header, payload = {"error": f"not a readable PDF ({why})", "new_child": True}, b""
        except MemoryError:
            header, payload = {"error": f"pdfium needs more than {memory_limit >> 20:,} MiB for it"}, b""
        _send(stdout, header, payload)


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
