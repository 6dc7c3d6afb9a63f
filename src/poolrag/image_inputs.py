"""Which call inputs are images: a PIL image, encoded bytes, a local file path or a ``data:`` URL.

Checked without importing Pillow (an extra), so every front door can tell an image from a text and
a text-only model can refuse one in a line. A plain ``str`` is always a text, unless it is a
``data:image/...`` URL: a string that happens to name a file is never opened. Decoding is the
input stage's (:mod:`poolrag.tokenization.images`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import re
import threading
from pathlib import Path, PurePath
from typing import Any

from poolrag.errors import InputTypeError, InvalidImageError
from poolrag.fork_holds import hold_over_fork

DATA_URL_PREFIX = "data:image/"
#: pixels composited on white at a time (:func:`on_white`)
COMPOSITED_PIXELS = 1 << 20
#: locks a PIL image's first read takes, one picked by the image's identity (:func:`loaded`)
_LOAD_LOCKS = tuple(threading.Lock() for _ in range(64))
hold_over_fork(lambda: _LOAD_LOCKS)


def is_pil_image(value: object) -> bool:
    return any(cls.__module__.startswith("PIL.") and cls.__name__ == "Image" for cls in type(value).__mro__)


def is_image_input(value: Any) -> bool:
    """``value`` is meant as an image (whether it decodes is checked when it is read)."""
    if isinstance(value, (bytes, bytearray, memoryview, PurePath)):
        return True
    if isinstance(value, str):
        return value[: len(DATA_URL_PREFIX)].lower() == DATA_URL_PREFIX
    return is_pil_image(value)


#: a base64 ``data:`` URL of any media type (or none): what a client sends a file as
_BASE64_DATA_URL = re.compile(r"data:([a-z0-9.+-]+/[a-z0-9.+-]+)?(;[a-z0-9.+=-]+)*;base64,", re.IGNORECASE)


def other_data_url(value: object) -> str | None:
    """The media type of a base64 ``data:`` URL that is not an image (``application/pdf``;
    ``"untyped"`` without one), else ``None``: to a model that reads images such a URL was meant as
    a file, not as a text to read. A text that merely starts with ``data:`` is a text."""
    if not isinstance(value, str) or is_image_input(value):
        return None
    match = _BASE64_DATA_URL.match(value[:256])
    return None if match is None else (match.group(1) or "untyped")


# the leading bytes of the formats a data URL is most often made of; Pillow reads the content either way
_MAGIC = {b"\x89PNG": "png", b"\xff\xd8\xff": "jpeg", b"GIF8": "gif", b"RIFF": "webp", b"BM": "bmp"}


_WRAPPING = re.compile(rb"[ \t\r\n]+")


def base64_bytes(text: str) -> bytes:
    """Strict base64 (``binascii.Error`` on anything else), read across the line breaks a MIME
    encoder writes (Python's ``base64.encodebytes``, ``openssl base64``), as browsers read data URLs."""
    return base64.b64decode(_WRAPPING.sub(b"", text.encode("ascii")), validate=True)


def text_only(name: str) -> InputTypeError:
    """The refusal of an image at ``name`` (``input[3]``) by a model that reads text only: said
    before any work, as every door says it (a data URL would otherwise be read as text)."""
    return InputTypeError(f"{name}: this model reads text only, not images", param=name.split("[")[0])


def refuse_empty(size: tuple[int, int], name: str) -> None:
    """An image of no pixels is refused by name: an image processor would divide by its zero side."""
    if not size[0] or not size[1]:
        raise InvalidImageError(name, f"the image is {size[0]}x{size[1]}: it has no pixels")


def image_file_bytes(path: PurePath, name: str) -> bytes:
    """A caller's image file, read on the caller's side (the client, the cache's key), refused as
    the engine refuses it: by ``name``, no file there or not readable."""
    path = Path(path)
    if not path.is_file():
        raise InvalidImageError(name, f"no image file at {path}")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InvalidImageError(name, f"not a readable image ({exc.strerror})") from None


def as_data_url(value: Any, name: str = "input") -> str:
    """An image input as a ``data:image/...;base64,`` URL, the form it crosses HTTP in (a PIL image
    is written as a PNG of the RGB pixels the engine reads from it, :func:`on_white`; a path is read
    here, on the caller's side, and refused as the engine refuses it, by ``name``)."""
    if isinstance(value, str):
        return value  # a data URL already
    if isinstance(value, PurePath):
        value = image_file_bytes(value, name)
    if is_pil_image(value):
        refuse_empty(value.size, name)
        buffer = io.BytesIO()
        # its own mode would not do: a palette's alpha is written as tRNS, which the server shows on
        # white where the engine does not; a PA or LAB picture has no PNG mode
        opaque = value.mode in ("RGB", "L") and value.info.get("transparency") is None
        (loaded(value, name) if opaque else on_white(value, name)).save(buffer, format="PNG")
        value = buffer.getvalue()
    data = bytes(value)
    kind = next((name for magic, name in _MAGIC.items() if data.startswith(magic)), "unknown")
    return f"{DATA_URL_PREFIX}{kind};base64,{base64.b64encode(data).decode()}"


def loaded(image: Any, name: str = "input") -> Any:
    """A caller's PIL ``image`` with its pixels read, by one thread at a time: ``Image.open`` reads
    only the header, and the pixels come from the one file handle on first use, so one picture
    given twice in a call (prepared on several threads) or shared by two callers would be read
    by both at once and fail as truncated. A file that cannot be read is refused by ``name``."""
    with _LOAD_LOCKS[(id(image) >> 4) % len(_LOAD_LOCKS)]:
        try:
            image.load()
        except (OSError, ValueError, SyntaxError) as exc:
            raise InvalidImageError(name, f"not a readable image ({exc})") from None
    return image


def on_white(image: Any, name: str = "input") -> Any:
    """A PIL ``image`` in RGB, a transparent part shown on white: what the engine prepares every
    image as (:func:`~poolrag.tokenization.images.decode_image`), and what transformers' image
    processors (``convert_to_rgb``) and so sentence-transformers give a logo or a screenshot with
    an alpha channel; a bare ``convert("RGB")`` would show it on black and move the vector. A
    caller's lazily opened file is decoded here, so a truncated one is refused by ``name``."""
    from PIL import Image  # there: ``image`` is one

    loaded(image, name)
    try:
        if "A" not in image.getbands() and image.info.get("transparency") is None:
            return image.convert("RGB")
        # composited a strip of rows at a time, each pixel as alone: the RGBA copies are a
        # strip's, not the image's (7,990 x 7,990 palette pixels took 1 GB, now 270 MB)
        width, height = image.size
        rows = max(1, COMPOSITED_PIXELS // max(1, width))
        seen = Image.new("RGB", image.size)
        for top in range(0, height, rows):
            strip = image.crop((0, top, width, min(height, top + rows))).convert("RGBA")
            white = Image.new("RGBA", strip.size, (255, 255, 255, 255))
            seen.paste(Image.alpha_composite(white, strip).convert("RGB"), (0, top))
    except (OSError, ValueError, SyntaxError) as exc:
        raise InvalidImageError(name, f"not a readable image ({exc})") from None
    return seen


def image_identity(value: Any, name: str = "input", *, turned: bool | None = False) -> str:
    """What an image input is, for a cache key: the SHA-256 of its encoded bytes (a path, the bytes
    and a data URL of one file agree), or of the RGB pixels the engine reads from a PIL image
    (:func:`on_white`: its palette and transparency count, as they do for the vector). A file that
    cannot be read is refused as the engine refuses it, named ``name`` (``input[2]``).

    ``turned`` says whether decoding turns the encoded image upright by its EXIF orientation
    (:func:`~poolrag.tokenization.images.turned_upright`; ``None``: unknown, Pillow is not
    installed): such an image has a key of its own, so a vector of it on its side, stored before
    poolrag read orientations, is never served; every other image keeps the key it always had."""
    if is_pil_image(value):
        seen = on_white(value, name)
        digest = hashlib.sha256(f"{seen.mode}{seen.size}".encode())
        digest.update(seen.tobytes())
        return f"image-pixels:{digest.hexdigest()}"
    if isinstance(value, PurePath):
        data = image_file_bytes(value, name)
    elif isinstance(value, str):
        try:
            data = base64_bytes(value.partition(",")[2])
        except (binascii.Error, ValueError):
            data = value.encode()  # unreadable: the engine says so when it is embedded
    else:
        data = bytes(value)
    prefix = {False: "image-bytes", True: "image-upright-bytes", None: "image-bytes-unchecked"}[turned]
    return f"{prefix}:{hashlib.sha256(data).hexdigest()}"
