"""Which call inputs are images: a PIL image, encoded bytes, a local file path or a ``data:`` URL.

Checked without importing Pillow (an extra), so every front door can tell an image from a text and
a text-only model can refuse one in a line. A plain ``str`` is always a text, unless it is a
``data:image/...`` URL: a string that happens to name a file is never opened. Decoding is the
input stage's (:mod:`poolrag.tokenization.images`).
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

DATA_URL_PREFIX = "data:image/"


def is_pil_image(value: object) -> bool:
    return any(cls.__module__.startswith("PIL.") and cls.__name__ == "Image" for cls in type(value).__mro__)


def is_image_input(value: Any) -> bool:
    """``value`` is meant as an image (whether it decodes is checked when it is read)."""
    if isinstance(value, (bytes, bytearray, memoryview, PurePath)):
        return True
    if isinstance(value, str):
        return value[: len(DATA_URL_PREFIX)].lower() == DATA_URL_PREFIX
    return is_pil_image(value)
