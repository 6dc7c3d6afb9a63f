"""Folders of images and PDFs for the page-ingest tests: real files written by real libraries
(matplotlib's ``PdfPages`` with a text layer and its sample photograph), and the hostile files a
folder on a user's disk can hold (a truncated PNG, a bomb's header, a PDF that inflates to 1 GB)."""

from __future__ import annotations

import io
import shutil
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path


def sample_photo() -> Path:
    """matplotlib's sample photograph (a JPEG of Grace Hopper), shipped in its wheel."""
    import matplotlib

    return Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"


def write_pdf(path: Path, pages: Sequence[str], photo_on: int | None = None) -> Path:
    """A PDF saved by matplotlib, one page per text (a real text layer pdfium reads back); page
    ``photo_on`` also shows the sample photograph."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_pdf import PdfPages

    with PdfPages(path) as pdf:
        for index, text in enumerate(pages):
            figure = plt.figure(figsize=(4.25, 5.5))
            figure.text(0.08, 0.92, text, fontsize=11)
            if index == photo_on:
                axes = figure.add_axes((0.1, 0.1, 0.8, 0.7))
                axes.imshow(plt.imread(sample_photo()))
                axes.axis("off")
            pdf.savefig(figure)
            plt.close(figure)
    return path


def copy_photo(path: Path) -> Path:
    shutil.copyfile(sample_photo(), path)
    return path


def oriented_photo(path: Path, orientation: int | None, size: tuple[int, int] = (120, 80)) -> Path:
    """The sample photograph as a JPEG Pillow writes with the EXIF ``Orientation`` tag a phone
    writes (3: upside down, 6 and 8: on its side; ``None``: no tag), its pixels as the sensor
    stored them, so only the tag says which way is up."""
    from PIL import Image

    tags = {}
    if orientation is not None:
        exif = Image.Exif()
        exif[0x0112] = orientation
        tags["exif"] = exif
    with Image.open(sample_photo()) as photo:
        photo.convert("RGB").resize(size).save(path, format="JPEG", quality=95, **tags)
    return path


def png_claiming(width: int, height: int) -> bytes:
    """A real 1 x 1 PNG whose header (CRC fixed up) says ``width`` x ``height``: a bomb's shape."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("L", (1, 1)).save(buffer, format="PNG")
    data = bytearray(buffer.getvalue())
    start = data.index(b"IHDR")
    data[start + 4 : start + 12] = struct.pack(">II", width, height)
    crc = zlib.crc32(bytes(data[start : start + 17])) & 0xFFFFFFFF
    data[start + 17 : start + 21] = struct.pack(">I", crc)
    return bytes(data)


def truncated_png(path: Path) -> Path:
    from PIL import Image

    buffer = io.BytesIO()
    Image.linear_gradient("L").convert("RGB").save(buffer, format="PNG")
    path.write_bytes(buffer.getvalue()[: len(buffer.getvalue()) // 2])
    return path


def _pdf(objects: Sequence[bytes]) -> bytes:
    """A PDF file of ``objects`` (numbered from 1, the first the catalog) with its cross-reference table."""
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    table = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{table}\n%%EOF\n".encode()
    return bytes(out)


def _one_page_pdf(content: bytes, width: int = 612, height: int = 792, stream: bytes = b"") -> bytes:
    """A PDF of one ``width`` x ``height`` page drawn by ``content``; ``stream``: entries of the
    content stream's dictionary before its length (a filter)."""
    return _pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Contents 4 0 R >>" % (width, height),
            b"<< %s/Length %d >>\nstream\n" % (stream, len(content)) + content + b"\nendstream",
        ]
    )


def inflating_pdf(inflated_bytes: int = 1 << 30) -> bytes:
    """A one-page PDF of about 1 MB whose page content inflates to ``inflated_bytes`` (a compression
    bomb: whatever parses the page holds it all)."""
    packer = zlib.compressobj(9)
    block = b" " * (1 << 24)
    parts = [packer.compress(block) for _ in range(inflated_bytes // len(block))]
    parts += [packer.compress(b"BT /F1 12 Tf 10 10 Td (hi) Tj ET"), packer.flush()]
    return _one_page_pdf(b"".join(parts), stream=b"/Filter /FlateDecode ")


def huge_page_pdf(points: int = 14400) -> bytes:
    """A one-page PDF whose page is ``points`` x ``points`` (14,400: 200 inches, PDF's largest)."""
    return _one_page_pdf(b"BT /F1 12 Tf 10 10 Td (a very large page) Tj ET", points, points)


def red_page_pdf(points: int) -> bytes:
    """A one-page PDF whose ``points`` x ``points`` page is filled pure red: its pixels show the
    byte order (RGB, not BGR) and any row padding left in."""
    return _one_page_pdf(b"1 0 0 rg 0 0 %d %d re f" % (points, points), points, points)


def many_pages_pdf(pages: int) -> bytes:
    """A PDF whose page tree lists one page ``pages`` times (small file, huge page count)."""
    kids = b" ".join(b"3 0 R" for _ in range(pages))
    return _pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % pages,
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>",
        ]
    )
