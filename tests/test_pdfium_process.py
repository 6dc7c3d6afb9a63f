"""pdfium runs in a child process with bounded memory and time: a PDF that would take gigabytes,
crash pdfium or never finish costs the child, is one line, and the next PDF reads as ever."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from poolrag.errors import InvalidInputError
from poolrag.ingest.pdf_pages import MAX_PAGE_SIDE
from poolrag.pdfium_process import PdfiumProcess
from poolrag.testing.page_corpus import huge_page_pdf, inflating_pdf, red_page_pdf, write_pdf

pytest.importorskip("pypdfium2", reason="PDF pages need the images extra (pypdfium2)")
pytest.importorskip("PIL", reason="PDF pages need the images extra (Pillow)")


@pytest.fixture
def pdfium():
    process = PdfiumProcess(memory_limit=384 << 20)
    yield process
    process.close()


def test_a_real_pdf_reads_its_text_layer_and_renders_within_the_bounds(tmp_path: Path, pdfium) -> None:
    pdf = write_pdf(tmp_path / "two.pdf", ["first page words", "second page words"])
    assert [t.strip() for t in pdfium.page_texts(str(pdf), 10)] == ["first page words", "second page words"]
    (width, height), pixels = pdfium.render(str(pdf), 1, 72, 4096)
    assert (width, height) == (306, 396)  # 4.25 x 5.5 inches at 72 dpi
    assert len(pixels) == width * height * 3 and len(set(pixels)) > 1  # drawn, not blank
    (width, height), _ = pdfium.render(str(pdf), 1, 600, 256)
    assert max(width, height) == 256  # the longer side is capped whatever the resolution asked


def test_pages_render_as_packed_rgb_rows_up_to_the_largest_size_in_the_default_memory(tmp_path: Path) -> None:
    """Red is red (RGB, not BGR) and rows carry no padding (a 101-pixel row is 303 bytes, which
    pdfium pads to 304); a square page at the largest size a page may be rendered at (the engine's
    64 M pixel cap) renders in well under the child's default 1 GiB: the pixels are copied once
    (converting them through Pillow took more than 768 MiB)."""
    pdf = tmp_path / "red.pdf"
    pdf.write_bytes(red_page_pdf(2000))
    process = PdfiumProcess(memory_limit=640 << 20)
    try:
        (width, height), pixels = process.render(str(pdf), 0, 72, 101)
        assert (width, height) == (101, 101) and pixels == b"\xff\x00\x00" * (101 * 101)
        (width, height), pixels = process.render(str(pdf), 0, 600, MAX_PAGE_SIDE)
        assert (width, height) == (MAX_PAGE_SIDE, MAX_PAGE_SIDE) == (8000, 8000)
        assert len(pixels) == 8000 * 8000 * 3 and pixels[:3] == pixels[-3:] == b"\xff\x00\x00"
    finally:
        process.close()


#: a well-formed PDF of no pages: pdfium refuses to load it without setting an error code of its own
ZERO_PAGES = (
    b"%PDF-1.4\n1 0 obj\n<</Type/Catalog/Pages 2 0 R>>\nendobj\n2 0 obj\n<</Type/Pages/Kids[]/Count 0>>\n"
    b"endobj\nxref\n0 3\n0000000000 65535 f \n0000000009 00000 n \n0000000054 00000 n \ntrailer\n"
    b"<</Size 3/Root 1 0 R>>\nstartxref\n100\n%%EOF\n"
)


def test_each_unreadable_pdf_is_described_by_its_own_failure(tmp_path: Path, pdfium) -> None:
    """pdfium keeps its last error code until another error replaces it: a PDF with no pages, read
    after a damaged one, was reported with the damaged one's 'Data format error'."""
    (tmp_path / "damaged.pdf").write_bytes(b"%PDF-1.4 garbage garbage")
    (tmp_path / "empty.pdf").write_bytes(ZERO_PAGES)
    with pytest.raises(InvalidInputError, match=r"not a readable PDF \(.*Data format error"):
        pdfium.page_texts(str(tmp_path / "damaged.pdf"), 10)
    with pytest.raises(
        InvalidInputError, match=r"not a readable PDF \(pdfium cannot load it: no pages, or damaged\)$"
    ):
        pdfium.page_texts(str(tmp_path / "empty.pdf"), 10)
    pdf = write_pdf(tmp_path / "one.pdf", ["still read"])
    assert [t.strip() for t in pdfium.page_texts(str(pdf), 10)] == ["still read"]


_BOMB_RUN = """
import json, resource, sys
from poolrag.errors import InvalidInputError
from poolrag.pdfium_process import PdfiumProcess
from poolrag.testing.page_corpus import write_pdf
from pathlib import Path

def rss():
    line = next(l for l in open("/proc/self/status") if l.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024

process = PdfiumProcess(memory_limit=384 << 20)
process.page_texts(write_pdf(Path(sys.argv[2]), ["warm"]).as_posix(), 10)  # the child is up
before = rss()
try:
    process.page_texts(sys.argv[1], 10)
    error = None
except InvalidInputError as exc:
    error = str(exc)
grew = rss() - before
after = process.page_texts(sys.argv[2], 10)  # a new child reads the next PDF
children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps({"error": error, "grew": grew, "children": children, "after": after}))
"""


def test_a_compression_bomb_costs_the_child_not_the_caller(tmp_path: Path) -> None:
    """Measured in a process of its own, so that no other child of the test run counts."""
    bomb = tmp_path / "bomb.pdf"
    bomb.write_bytes(inflating_pdf(1 << 30))  # about 1 MB inflating to 1 GiB
    assert bomb.stat().st_size < 2 << 20
    run = subprocess.run(
        [sys.executable, "-c", _BOMB_RUN, str(bomb), str(tmp_path / "good.pdf")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    measured = json.loads(run.stdout.strip().splitlines()[-1])
    assert measured["error"].startswith("pdfium stopped on it (it needs more than 384 MiB")
    assert measured["grew"] < 64 << 20  # the caller held none of the gigabyte
    assert measured["children"] < 512 << 20  # nor did the child: it stopped at its limit
    assert [t.strip() for t in measured["after"]] == ["warm"]


def test_a_two_hundred_inch_page_renders_as_small_as_a_letter_page(tmp_path: Path, pdfium) -> None:
    huge = tmp_path / "huge.pdf"
    huge.write_bytes(huge_page_pdf(14400))
    (width, height), pixels = pdfium.render(str(huge), 0, 150, 1024)
    assert (width, height) == (1024, 1024) and len(pixels) == 1024 * 1024 * 3


def test_a_call_over_its_time_is_stopped_and_the_next_one_runs(tmp_path: Path) -> None:
    pdf = write_pdf(tmp_path / "one.pdf", ["a page"])
    slow = PdfiumProcess(call_seconds=1e-4)  # shorter than starting the child takes
    try:
        with pytest.raises(InvalidInputError, match="pdfium took longer than 0 s on it"):
            slow.render(str(pdf), 0, 150, 1024)
        slow.call_seconds = 60
        assert slow.render(str(pdf), 0, 72, 1024)[0] == (306, 396)
    finally:
        slow.close()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"hello, this is a text file", "not a readable PDF"),
        (b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog", "not a readable PDF"),
    ],
    ids=["not-a-pdf", "cut-short"],
)
def test_a_file_that_is_no_pdf_is_one_line(tmp_path: Path, pdfium, content: bytes, message: str) -> None:
    path = tmp_path / "x.pdf"
    path.write_bytes(content)
    with pytest.raises(InvalidInputError, match=message):
        pdfium.page_texts(str(path), 10)


def test_a_page_count_over_the_limit_is_refused_before_any_page_is_read(tmp_path: Path, pdfium) -> None:
    from poolrag.testing.page_corpus import many_pages_pdf

    path = tmp_path / "many.pdf"
    path.write_bytes(many_pages_pdf(200))
    with pytest.raises(InvalidInputError, match="the PDF has 200 pages, more than 100"):
        pdfium.page_texts(str(path), 100)


def _page_texts_in_child(path: str) -> list[str]:
    from poolrag.pdfium_process import shared_pdfium

    return [text.strip() for text in shared_pdfium().page_texts(path, 10)]


def test_a_worker_forked_during_a_pdf_call_reads_pdfs_with_a_pdfium_child_of_its_own(tmp_path: Path) -> None:
    """A ``fork`` pool started while another thread reads a PDF: the worker's copy of the call's lock
    was held for ever (its first PDF hung), and the pdfium child it inherited is the parent's, whose
    pipes both processes would write to."""
    from poolrag.pdfium_process import shared_pdfium
    from poolrag.testing.fork_while_held import in_fork_while_held

    pdf = write_pdf(tmp_path / "forked.pdf", ["read in the worker"])
    shared = shared_pdfium()
    assert [t.strip() for t in shared.page_texts(str(pdf), 10)] == ["read in the worker"]  # the child is up
    parents_child = shared._child
    got = in_fork_while_held(shared._lock, _page_texts_in_child, str(pdf), timeout=60)
    assert got == ["read in the worker"]
    assert [t.strip() for t in shared.page_texts(str(pdf), 10)] == ["read in the worker"]
    assert shared._child is parents_child  # the parent's child was neither used nor stopped by the worker
