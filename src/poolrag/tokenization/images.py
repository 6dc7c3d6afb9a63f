"""Images to the pixels a model reads: decoded within limits, then its own image processor.

An image input is a PIL image, encoded bytes, a local path or a ``data:image/...;base64,`` URL
(:mod:`poolrag.image_inputs`); a remote URL is never fetched. Decoding refuses what would cost
unbounded memory (more than ``MAX_IMAGE_PIXELS``: a decompression bomb; a strip more than
``MAX_ASPECT_RATIO`` times longer than wide) or cannot be read (a truncated file, a text with an
image's name, a format outside ``IMAGE_FORMATS``) in one line naming the input. The size comes from
the header, before a pixel is decoded; an icon's from the header of each image inside it, since
Pillow decodes an icon's image while opening the file. The images decoded at once hold at most
``DECODING_PIXELS`` pixels together (:class:`~poolrag.tokenization.pixel_budget.PixelBudget`). An
image decoded here from its encoded bytes is turned upright by its EXIF orientation, as
transformers' ``load_image`` (so sentence-transformers given a path) and every viewer show a phone's
photo; a PIL image the caller opened is read as given, as the image processors read it. The pixels
then go through the folder's saved image processor, as transformers' processor would prepare them.
"""

from __future__ import annotations

import binascii
import hashlib
import io
import logging
import os
import struct
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path, PurePath
from typing import Any

import numpy as np

from poolrag.cpu_budget import usable_cpus
from poolrag.errors import InvalidImageError, InvalidInputError, ModelLoadError
from poolrag.image_inputs import base64_bytes, is_pil_image, on_white, refuse_empty
from poolrag.request import Pixels, PoolingRequest, ResolvedParams
from poolrag.tokenization.pixel_budget import PixelBudget
from poolrag.tokenization.prepared_ahead import prepared_ahead

logger = logging.getLogger(__name__)

#: the most pixels one decoded image may have (about 8,000 x 8,000); a bigger one is refused
MAX_IMAGE_PIXELS = 64_000_000
#: how many times longer than wide (or wide than long) an image may be: a 20,000 x 1 PNG is 99
#: bytes, and a processor that scales the short side to 224 (CLIP's) makes it 4,480,000 x 224
#: pixels, 10 GB on the way; transformers' Qwen2-VL processor refuses the same ratio
MAX_ASPECT_RATIO = 200
#: the formats decoded (Pillow's names; JPEG includes a camera's MPO), those the installed Pillow
#: reads (AVIF from Pillow 11.2). Pillow opens others too, and its EPS reader runs Ghostscript on
#: the bytes: request data never reaches it
IMAGE_FORMATS = ("PNG", "JPEG", "WEBP", "GIF", "BMP", "TIFF", "ICO", "PPM", "AVIF")
IMAGES_EXTRA = 'images need Pillow: pip install "poolrag[images]"'
#: the pixels of the images being decoded and prepared at once, all threads and models together:
#: one image at the cap, or several smaller ones (an image's decoded, RGB and prepared copies take
#: about 14 bytes a pixel at their peak: 0.9 GB at the cap, for CLIP)
DECODING_PIXELS = MAX_IMAGE_PIXELS
DECODING = PixelBudget(DECODING_PIXELS)
_ICO_MAGIC = b"\x00\x00\x01\x00"
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
#: the EXIF Orientation tag and the turn that shows each of its values upright, Pillow's names (those
#: of ``PIL.ImageOps.exif_transpose``, which transformers' ``load_image`` applies); 1 is upright
_ORIENTATION_TAG = 0x0112
_TURNS = {
    2: "FLIP_LEFT_RIGHT",
    3: "ROTATE_180",
    4: "FLIP_TOP_BOTTOM",
    5: "TRANSPOSE",
    6: "ROTATE_270",
    7: "TRANSVERSE",
    8: "ROTATE_90",
}
#: the PNG chunks Pillow finds an orientation in (eXIf, an XMP packet or ImageMagick's raw EXIF profile
#: in a text chunk); after the pixel data it reads them only by decoding the pixels
_PNG_METADATA = (b"eXIf", b"tEXt", b"zTXt", b"iTXt")


def pillow() -> Any:
    """Pillow's ``Image`` module, or the error naming the images extra that installs it."""
    try:
        from PIL import Image
    except ImportError:
        raise ModelLoadError(IMAGES_EXTRA) from None
    return Image


def _encoded(value: object, name: str) -> bytes | Path:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, PurePath):
        path = Path(value)
        if not path.is_file():
            raise InvalidImageError(name, f"no image file at {path}")
        return path
    assert isinstance(value, str)  # a data: URL (is_image_input)
    header, comma, payload = value.partition(",")
    if not comma or not header.lower().endswith(";base64"):
        raise InvalidImageError(name, "an image data URL must be base64 (data:image/...;base64,...)")
    try:
        return base64_bytes(payload)
    except (binascii.Error, ValueError):
        raise InvalidImageError(name, "the image data URL is not valid base64") from None


def decode_image(value: object, name: str = "input") -> Any:
    """``value`` as an RGB PIL image, or one line saying why it cannot be read."""
    with decoded(value, name) as image:
        return image


@contextmanager
def decoded(value: object, name: str = "input") -> Iterator[Any]:
    """:func:`decode_image`, its pixels held in :data:`DECODING` until the block ends (where the
    image processor makes its own copies of them)."""
    image_module = pillow()
    opened = not is_pil_image(value)
    image = _open(image_module, _encoded(value, name), name) if opened else value
    _check_size(image.size, name)  # from the header, before a pixel is decoded
    width, height = image.size
    with DECODING.hold(width * height):
        if opened:
            with _read_errors(image_module, name):
                image.load()
                image = _upright(image, image_module)
        yield on_white(image, name)


def _open(image_module: Any, source: bytes | Path, name: str) -> Any:
    """``source`` opened by Pillow, its header read and no pixel decoded (an icon's images checked
    first, since Pillow decodes one while opening it)."""
    with _read_errors(image_module, name):
        _check_icon(source, name)
        return image_module.open(
            io.BytesIO(source) if isinstance(source, bytes) else source, formats=_readers(image_module)
        )


def _orientation(image: Any, image_class: Any = None) -> int:
    """The EXIF orientation Pillow reads for ``image`` (2 to 8), 1 where it has none, an unknown
    value, or metadata Pillow cannot parse (the pixels are still the picture: it is read as stored,
    as a viewer shows it). Read through ``image_class`` (Pillow's ``Image``), it is what opening the
    file found: a PNG's own ``getexif`` decodes the pixels to look for metadata after them."""
    try:
        exif = image.getexif() if image_class is None else image_class.getexif(image)
        value = exif.get(_ORIENTATION_TAG, 1)
    except Exception:  # metadata beside the pixels, in any shape a camera or tool wrote
        logger.debug("unreadable EXIF orientation, the image is read as stored", exc_info=True)
        return 1
    return value if isinstance(value, int) and value in _TURNS else 1


def _upright(image: Any, image_module: Any) -> Any:
    """A decoded ``image`` turned upright by its EXIF orientation, as ``load_image`` turns it (a TIFF
    Pillow has turned while decoding it, and its tag is gone)."""
    orientation = _orientation(image)
    if orientation == 1:
        return image
    turned = image.transpose(getattr(image_module.Transpose, _TURNS[orientation]))
    image.close()
    return turned


def frames(path: Path, name: str = "input") -> tuple[str, int]:
    """The format of the image file at ``path`` and how many frames (a TIFF's pages, an
    animation's frames) it holds, of which decoding reads the first; ``("", 1)`` where Pillow
    cannot tell (the engine refuses such a file when it decodes it)."""
    try:
        with _open(pillow(), path, name) as image:
            return image.format or "", int(getattr(image, "n_frames", 1))
    except (ModelLoadError, InvalidImageError, OSError, ValueError):
        return "", 1


def turned_upright(value: object, name: str = "input") -> bool | None:
    """Whether decoding turns the encoded image ``value`` by its EXIF orientation (a PIL image: never),
    read from its header (a PNG whose metadata follows its pixels is decoded to read it, as decoding
    reads it); ``None`` without Pillow, which cannot tell. An image that cannot be read is ``False``:
    the engine refuses it when it is embedded. The embedding cache and ``poolrag ingest`` key such an
    image apart: what they stored before poolrag read orientations is the picture on its side."""
    if is_pil_image(value):
        return False
    try:
        image_module = pillow()
    except ModelLoadError:
        return None
    try:
        source = _encoded(value, name)
        with (
            _open(image_module, source, name) as image,
            _read_errors(image_module, name),
        ):
            if image.format == "TIFF":
                return False  # Pillow turns a TIFF itself while decoding it
            if image.format != "PNG" or "exif" in image.info or not _png_metadata_after_pixels(source):
                return _orientation(image, image_module.Image) != 1
            _check_size(image.size, name)
            with DECODING.hold(image.size[0] * image.size[1]):
                image.load()
                return _orientation(image) != 1
    except InvalidInputError:
        return False


def _png_metadata_after_pixels(source: bytes | Path) -> bool:
    """Whether a PNG has a chunk that may hold an orientation after its pixel data, found by walking
    the chunk headers (nothing is decompressed)."""
    with io.BytesIO(source) if isinstance(source, bytes) else source.open("rb") as file:
        file.seek(len(_PNG_MAGIC))
        pixels = False
        while len(head := file.read(8)) == 8:
            length, kind = struct.unpack(">I4s", head)
            if kind == b"IEND":
                break
            if kind == b"IDAT":
                pixels = True
            elif pixels and kind in _PNG_METADATA:
                return True
            file.seek(length + 4, io.SEEK_CUR)
    return False


def _readers(image_module: Any) -> tuple[str, ...]:
    """The :data:`IMAGE_FORMATS` this Pillow has a reader for: ``Image.open`` fails with a
    ``KeyError`` on a name it does not know (AVIF before Pillow 11.2) once the readers before it
    declined the bytes, where a file that is not an image must be one line."""
    image_module.init()
    return tuple(name for name in IMAGE_FORMATS if name in image_module.OPEN)


@contextmanager
def _read_errors(image_module: Any, name: str) -> Iterator[None]:
    """Pillow's failures to read an image, as one line naming the input."""
    try:
        yield
    except InvalidInputError:
        raise
    except image_module.DecompressionBombError:  # Pillow's own bound, far above ours
        raise InvalidImageError(name, _too_large("refused by Pillow")) from None
    except (OSError, ValueError, SyntaxError) as exc:  # PIL's UnidentifiedImageError is an OSError
        raise InvalidImageError(name, f"not a readable image ({_reason(exc)})") from None


def _check_icon(source: bytes | Path, name: str) -> None:
    """An icon's images checked by the sizes their own headers give: its directory says 256 x 256
    at most, whatever the PNG inside holds, and Pillow decodes that PNG while opening the file
    (a 656 KB icon holding a 13,000 x 13,000 PNG took 4 s and 650 MB before it was refused)."""
    with io.BytesIO(source) if isinstance(source, bytes) else source.open("rb") as file:
        if file.read(4) != _ICO_MAGIC:
            return
        count = int.from_bytes(file.read(2), "little")
        entries = [file.read(16) for _ in range(count)]
        if not all(len(entry) == 16 for entry in entries):
            return  # a truncated directory: Pillow refuses it when it opens the file
        for offset in (int.from_bytes(entry[12:16], "little") for entry in entries):
            file.seek(offset)
            size = _icon_image_size(file.read(26))
            if size is not None:
                _check_size(size, name)


def _icon_image_size(head: bytes) -> tuple[int, int] | None:
    """The size one image of an icon says it has: a PNG's, or a bitmap's (its height counts the
    transparency mask below the picture, so it is halved, as Pillow halves it)."""
    if head.startswith(_PNG_MAGIC) and len(head) >= 24:
        width, height = struct.unpack(">II", head[16:24])
        return width, height
    if len(head) < 12:
        return None  # a truncated file: Pillow says so when it opens it
    if int.from_bytes(head[:4], "little") == 12:  # an OS/2 bitmap header: 16-bit sides
        width, height = struct.unpack("<HH", head[4:8])
    else:
        width, height = struct.unpack("<ii", head[4:12])
    return abs(width), abs(height) // 2


def _too_large(what: str) -> str:
    return f"the image has more than {MAX_IMAGE_PIXELS:,} pixels ({what})"


def _reason(exc: Exception) -> str:
    """Pillow's reason, without the in-memory buffer it names (``<_io.BytesIO object at 0x...>``)."""
    if type(exc).__name__ == "UnidentifiedImageError":
        return "not a known image format"
    return str(exc)


def _check_size(size: tuple[int, int], name: str) -> None:
    refuse_empty(size, name)
    width, height = size
    if width * height > MAX_IMAGE_PIXELS:
        raise InvalidImageError(name, _too_large(f"{width}x{height}"))
    if max(width, height) > MAX_ASPECT_RATIO * min(width, height):
        raise InvalidImageError(
            name,
            f"the image is {width}x{height}: one side is more than {MAX_ASPECT_RATIO} times the other, "
            "which an image processor would scale up without bound",
        )


#: threads preparing one call's images: decoding, resizing and normalising run in Pillow's and
#: numpy's C code without the GIL, so the images of a call are prepared side by side, on the CPUs
#: this process may use (``os.cpu_count()`` counts the host's, past a ``taskset`` or a container's quota)
PREPARING_THREADS = min(8, usable_cpus())
#: a call's images prepared past the one the engine waits for: a part of the engine's (``READY_PART``)
#: so the threads keep ahead of the model, not all of a 2,048-image call's pixels at once
PREPARED_AHEAD = 32


class ImagePreprocessor:
    """The model folder's image processor (``preprocessor_config.json``), the slow PIL one, which
    needs no torchvision and is what the reference outputs are computed with."""

    def __init__(self, processor: Any, patch_size: int, class_token: bool = True) -> None:
        self.processor = processor
        self.patch_size = patch_size
        self.class_token = class_token  # CLIP's vision tower reads one more position; SigLIP's does not
        self._pool: ThreadPoolExecutor | None = None
        self._pool_pid = 0

    @classmethod
    def from_folder(cls, folder: str | Path, patch_size: int, class_token: bool = True) -> ImagePreprocessor:
        pillow()
        from transformers import AutoImageProcessor

        try:
            processor = AutoImageProcessor.from_pretrained(folder, backend="pil", trust_remote_code=False)
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"{folder}: no image processor to prepare images with ({exc})") from None
        return cls(processor, patch_size, class_token)

    def requests(self, items: Sequence[tuple[object, str]], params: ResolvedParams) -> list[PoolingRequest]:
        """One request per ``(image, name)``, prepared on a pool of threads; the first bad image in
        order is the error, as one by one."""
        if len(items) == 1 or PREPARING_THREADS == 1:
            return [self.request(value, params, name) for value, name in items]
        futures = [self._threads().submit(self.request, value, params, name) for value, name in items]
        try:
            return [future.result() for future in futures]
        finally:
            for future in futures:
                future.cancel()

    def request_futures(
        self, items: Sequence[tuple[object, str]], params: ResolvedParams
    ) -> list[PoolingRequest | Future[PoolingRequest]]:
        """The requests of ``items`` as they are being prepared on the pool of threads (a request
        where there is nothing to overlap): the engine hands the first to the model while the rest
        are still being prepared, ``PREPARED_AHEAD`` at most past the one it waits for."""
        if len(items) == 1 or PREPARING_THREADS == 1:
            return [self.request(value, params, name) for value, name in items]

        def prepare(item: tuple[object, str]) -> PoolingRequest:
            return self.request(item[0], params, item[1])

        return list(prepared_ahead(self._threads(), prepare, items, PREPARED_AHEAD))

    def _threads(self) -> ThreadPoolExecutor:
        if self._pool is None or self._pool_pid != os.getpid():  # a forked child has no threads
            self._pool = ThreadPoolExecutor(PREPARING_THREADS, thread_name_prefix="poolrag-images")
            self._pool_pid = os.getpid()
        return self._pool

    def request(self, value: object, params: ResolvedParams, name: str) -> PoolingRequest:
        with decoded(value, name) as image:
            prepared = self.processor(images=[image], return_tensors="np")
        values = np.asarray(prepared["pixel_values"][0], np.float32)
        # the identity of what the model sees (not of the decoded original, which may be 100x larger)
        digest = hashlib.sha256(np.ascontiguousarray(values).data).hexdigest()
        if "spatial_shapes" in prepared:  # SigLIP2: patches at the image's own aspect ratio, masked
            mask = np.asarray(prepared["pixel_attention_mask"][0])
            shape = tuple(int(n) for n in prepared["spatial_shapes"][0])
            pixels = Pixels(digest, values, max(1, int(mask.sum())), grid=shape, tile_mask=mask)
            return PoolingRequest(token_ids=(), params=params, pixels=pixels)
        grid = (values.shape[-1] // self.patch_size) * (values.shape[-2] // self.patch_size)
        patches = max(1, grid + int(self.class_token))
        return PoolingRequest(token_ids=(), params=params, pixels=Pixels(digest, values, patches))
