"""Image inputs are decoded within limits: what cannot be read, or would take unbounded memory, is
one line naming the input, and nothing is decoded past the limit."""

from __future__ import annotations

import base64
import io
import os
import resource
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from poolrag.errors import InvalidInputError
from poolrag.image_inputs import image_identity, is_image_input, other_data_url
from poolrag.testing.page_corpus import oriented_photo, png_claiming
from poolrag.tokenization.images import MAX_IMAGE_PIXELS, decode_image, turned_upright

Image = pytest.importorskip("PIL.Image", reason="images need the images extra (Pillow)")
PHOTO = Path(pytest.importorskip("matplotlib").get_data_path()) / "sample_data" / "grace_hopper.jpg"


def test_what_counts_as_an_image() -> None:
    assert is_image_input(b"\x89PNG") and is_image_input(PHOTO) and is_image_input(Image.new("RGB", (2, 2)))
    assert is_image_input("data:image/png;base64,AAAA") and is_image_input("DATA:IMAGE/png;base64,AAAA")
    # a string that names a file is a text: nothing is opened because of what a text says
    assert not is_image_input(str(PHOTO)) and not is_image_input("data:text/plain,hi")


def test_a_base64_data_url_of_another_type_is_told_from_a_text() -> None:
    """To a model that reads images, ``data:application/pdf;base64,...`` was meant as a file; a text
    that merely starts with ``data:`` is a text."""
    assert other_data_url("data:application/pdf;base64,JVBERi0=") == "application/pdf"
    assert other_data_url("DATA:;base64,AAAA") == "untyped"
    for text in (
        "data: the results of the survey",
        "data:text/plain,hello",
        "data:image/png;base64,AAAA",
        b"x",
    ):
        assert other_data_url(text) is None


def test_a_real_photo_decodes_in_every_form() -> None:
    data = PHOTO.read_bytes()
    forms = [PHOTO, data, "data:image/jpeg;base64," + base64.b64encode(data).decode(), Image.open(PHOTO)]
    sizes = {decode_image(form).size for form in forms}
    assert sizes == {Image.open(PHOTO).size}


def test_a_data_url_wrapped_as_mime_writes_base64_is_the_same_image() -> None:
    """``base64.encodebytes`` (and ``openssl base64``) break lines every 76 characters; browsers read
    such a data URL, and so does the engine, as the same bytes and the same cache identity."""
    data = PHOTO.read_bytes()
    flat = "data:image/jpeg;base64," + base64.b64encode(data).decode()
    wrapped = "data:image/jpeg;base64," + base64.encodebytes(data).decode().replace("\n", "\r\n")
    assert "\n" in wrapped
    assert decode_image(wrapped).tobytes() == decode_image(flat).tobytes()
    assert image_identity(wrapped) == image_identity(flat) == image_identity(data)
    with pytest.raises(InvalidInputError, match="not valid base64"):  # still strict about the alphabet
        decode_image(flat[:40] + "*" + flat[41:])


def _icon(image: bytes) -> bytes:
    """An icon holding ``image``, its directory saying 256 x 256 as a real icon's would."""
    directory = struct.pack("<HHH", 0, 1, 1) + struct.pack("<BBBBHHII", 0, 0, 0, 0, 1, 32, len(image), 22)
    return directory + image


def _bitmap_claiming(width: int, height: int) -> bytes:
    """An icon's bitmap header (its height counts the mask as well) and a few bytes."""
    return struct.pack("<IiiHHIIiiII", 40, width, 2 * height, 1, 32, 0, 0, 0, 0, 0, 0) + bytes(64)


@pytest.mark.parametrize(
    "inside", [png_claiming(8500, 8500), _bitmap_claiming(8500, 8500)], ids=["png", "bitmap"]
)
def test_an_icon_is_sized_by_the_image_inside_before_it_is_decoded(inside: bytes) -> None:
    """Pillow decodes an icon's image while opening the file, and the directory says 256 x 256 at
    most: 8,500 x 8,500 (under Pillow's own bomb limit) is refused by its header, never decoded."""
    with pytest.raises(
        InvalidInputError, match=r"^input\[3\]: the image has more than 64,000,000 pixels \(8500x8500\)$"
    ):
        decode_image(_icon(inside), "input[3]")


def test_an_icon_within_the_limits_is_read() -> None:
    icon = io.BytesIO()
    Image.new("RGBA", (48, 48), (10, 20, 30, 128)).save(icon, format="ICO", sizes=[(48, 48)])
    assert decode_image(icon.getvalue()).size == (48, 48)


def test_a_header_claiming_20000_by_20000_pixels_is_refused_before_decoding() -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(InvalidInputError, match=r"input\[2\]: the image has more than 64,000,000 pixels"):
        decode_image(png_claiming(20000, 20000), "input[2]")
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kb < 64 * 1024  # decoding it would take 400 MB (1.2 GB as RGB)
    assert MAX_IMAGE_PIXELS < 20000 * 20000


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (PHOTO.read_bytes()[:2000], "not a readable image"),  # a truncated JPEG
        (b"%PDF-1.4 this is not a picture", "not a readable image"),  # a non-image named .png
        ("data:image/png;base64,@@@", "not valid base64"),
        ("data:image/png,raw", "must be base64"),
    ],
    ids=["truncated", "not-an-image", "bad-base64", "not-base64"],
)
def test_what_cannot_be_read_is_one_line_naming_the_input(data: object, problem: str) -> None:
    with pytest.raises(InvalidInputError, match=rf"^documents\[1\]: .*{problem}") as caught:
        decode_image(data, "documents[1]")
    assert "\n" not in str(caught.value)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="no image file at"):
        decode_image(tmp_path / "gone.png")


def test_a_cmyk_picture_crosses_http_as_an_rgb_png() -> None:
    from poolrag.image_inputs import as_data_url

    url = as_data_url(Image.open(PHOTO).convert("CMYK"))
    assert url.startswith("data:image/png;base64,")
    assert decode_image(url).size == Image.open(PHOTO).size


@pytest.mark.parametrize("size", [(0, 0), (0, 5), (7, 0)])
def test_an_image_without_pixels_is_refused_in_one_line(size: tuple[int, int]) -> None:
    """Not the image processor's ZeroDivisionError, nor the aspect-ratio rule's words."""
    with pytest.raises(
        InvalidInputError, match=rf"^input\[2\]: the image is {size[0]}x{size[1]}: it has no pixels$"
    ):
        decode_image(Image.new("RGB", size), "input[2]")


def test_a_strip_and_a_format_outside_the_list_are_one_line_each() -> None:
    """A 99-byte 20,000 x 1 PNG would be scaled to 4,480,000 x 224 pixels by CLIP's processor; an
    EPS file would run Ghostscript inside Pillow. Neither is decoded."""
    from poolrag.errors import InvalidImageError

    strip = io.BytesIO()
    Image.new("L", (20000, 1)).save(strip, format="PNG")
    with pytest.raises(
        InvalidImageError, match=r"input: the image is 20000x1: one side is more than 200 times"
    ):
        decode_image(strip.getvalue())
    Image.new("L", (200, 1)).save(edge := io.BytesIO(), format="PNG")
    assert decode_image(edge.getvalue()).size == (200, 1)  # at the ratio itself: read
    eps = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n{ } loop\n"
    with pytest.raises(InvalidImageError, match=r"not a readable image \(not a known image format\)"):
        decode_image(eps)


def test_a_lazily_opened_truncated_file_is_refused_by_name(tmp_path: Path) -> None:
    """Image.open reads only the header: the pixels, and Pillow's 'image file is truncated', come
    when the engine converts it."""
    cut = tmp_path / "cut.jpg"
    cut.write_bytes(PHOTO.read_bytes()[:3000])
    with pytest.raises(
        InvalidInputError, match=r"^input\[1\]: not a readable image \(image file is truncated"
    ):
        decode_image(Image.open(cut), "input[1]")


def test_a_pillow_without_avif_says_a_non_image_is_not_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pillow 11.0 and 11.1 (the images extra takes pillow>=11) have no AVIF reader, and their
    ``Image.open`` fails with ``KeyError: 'AVIF'`` on a format name it does not know, once every
    reader before it declined: a text file named .png crashed ``poolrag ingest`` with a traceback.
    Without AVIF registered, as there, the file is one line and a real picture is still read."""
    Image.init()
    monkeypatch.delitem(Image.OPEN, "AVIF")  # the registry of a Pillow before 11.2
    with pytest.raises(
        InvalidInputError, match=r"^input\[0\]: not a readable image \(not a known image format\)$"
    ):
        decode_image(b"hello, not a picture", "input[0]")
    assert decode_image(PHOTO).size == Image.open(PHOTO).size


def test_one_lazily_opened_picture_given_many_times_is_read_once_not_on_every_thread(
    tmp_path: Path, minilm_path: Path
) -> None:
    """``Image.open`` reads only the header, and a call's images are prepared on a pool of threads:
    the same picture given eight times in one call (or shared by two callers) was decoded by several
    threads at once from its one file handle, and failed as 'not a readable image (image file is
    truncated)' or 'broken data stream', where sentence-transformers embeds it."""
    import numpy as np

    from poolrag import Engine
    from poolrag.testing.tiny_models import build_clip

    buffer = io.BytesIO()
    pixels = np.random.default_rng(1).integers(0, 255, (600, 800, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(buffer, "PNG")
    engine = Engine(build_clip(tmp_path / "clip", minilm_path), tune="off")
    expected = engine.embed_array([buffer.getvalue()])
    for _ in range(3):
        picture = Image.open(io.BytesIO(buffer.getvalue()))  # lazy: the pixels are read on first use
        got = engine.embed_array([picture] * 8)
        np.testing.assert_allclose(got, np.repeat(expected, 8, axis=0), atol=1e-6)


def _png_with_exif_after_its_pixels(path: Path, orientation: int) -> Path:
    """A PNG whose eXIf chunk follows its pixel data (the PNG extension allowed it there; Pillow
    finds it only when it decodes the pixels)."""
    picture = Image.open(PHOTO).convert("RGB").resize((60, 40))
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    exif = Image.Exif()
    exif[0x0112] = orientation
    payload = exif.tobytes()[6:]  # without the "Exif\0\0" a JPEG's APP1 starts with
    chunk = struct.pack(">I", len(payload)) + b"eXIf" + payload
    chunk += struct.pack(">I", zlib.crc32(b"eXIf" + payload))
    data = buffer.getvalue()
    end = data.rindex(b"IEND") - 4
    path.write_bytes(data[:end] + chunk + data[end:])
    return path


@pytest.mark.parametrize("orientation", [None, 3, 6, 8])
def test_an_encoded_photo_is_turned_upright_by_its_exif_orientation_as_load_image_turns_it(
    tmp_path: Path, orientation: int | None
) -> None:
    """A phone writes the sensor's pixels and an Orientation tag; transformers' ``load_image`` (so
    sentence-transformers given a path) and every viewer show the photo upright. poolrag read it on
    its side, and its vectors differed."""
    from transformers.image_utils import load_image

    path = oriented_photo(tmp_path / "photo.jpg", orientation)
    data = path.read_bytes()
    want = load_image(str(path))
    forms = [path, data, "data:image/jpeg;base64," + base64.b64encode(data).decode()]
    for form in forms:
        got = decode_image(form)
        assert (got.size, got.tobytes()) == (want.size, want.tobytes())
        assert turned_upright(form) is (orientation is not None)
    # a PIL image the caller opened is read as given, as the image processors read it
    opened = Image.open(path)
    assert decode_image(opened).tobytes() == Image.open(path).convert("RGB").tobytes()
    assert turned_upright(opened) is False


def test_a_png_s_orientation_is_read_before_or_after_its_pixels(tmp_path: Path) -> None:
    from transformers.image_utils import load_image

    before = tmp_path / "before.png"
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.open(PHOTO).convert("RGB").resize((60, 40)).save(before, exif=exif)
    after = _png_with_exif_after_its_pixels(tmp_path / "after.png", 8)
    for path in (before, after):
        want = load_image(str(path))
        assert want.size == (40, 60)
        assert decode_image(path).tobytes() == want.tobytes()
        assert turned_upright(path) is True
    plain = tmp_path / "plain.png"
    Image.open(PHOTO).convert("RGB").resize((60, 40)).save(plain)
    assert turned_upright(plain) is False


def test_a_tiff_turned_by_pillow_itself_is_turned_once(tmp_path: Path) -> None:
    """Pillow turns a TIFF by its Orientation tag while decoding it (poolrag's vectors of one were
    always upright, so its cache key stays)."""
    from transformers.image_utils import load_image

    path = tmp_path / "photo.tif"
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.open(PHOTO).convert("RGB").resize((60, 40)).save(path, exif=exif)
    got = decode_image(path)
    assert got.size == (40, 60) and got.tobytes() == load_image(str(path)).tobytes()
    assert turned_upright(path) is False


def test_an_unparseable_exif_block_leaves_the_photo_as_stored(tmp_path: Path) -> None:
    """Metadata a tool wrote badly is not a reason to refuse the picture: it is read as stored."""
    path = oriented_photo(tmp_path / "photo.jpg", None)
    data = path.read_bytes()
    segment = b"Exif\x00\x00MM\x00*\xff\xff\xff\xff"  # an IFD offset far past the block
    broken = data[:2] + b"\xff\xe1" + struct.pack(">H", len(segment) + 2) + segment + data[2:]
    assert decode_image(broken).tobytes() == decode_image(data).tobytes()
    assert turned_upright(broken) is False


def test_a_process_on_one_cpu_prepares_its_images_on_one_thread() -> None:
    """``taskset -c 0`` (or a container's ``--cpuset-cpus``) leaves one CPU: threads beyond it only
    hold more decoded pictures at once, while ``os.cpu_count()`` still counts the host's."""
    one_cpu = min(os.sched_getaffinity(0))
    child = subprocess.run(
        [sys.executable, "-c", "from poolrag.tokenization import images; print(images.PREPARING_THREADS)"],
        preexec_fn=lambda: os.sched_setaffinity(0, {one_cpu}),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert child.stdout.strip() == "1"
