"""An image with transparency is shown on white (what transformers' ``convert_to_rgb`` gives),
composited a strip of rows at a time: a 7,990 x 7,990 palette PNG took 1 GB as whole RGBA copies."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from poolrag.image_inputs import COMPOSITED_PIXELS, on_white

Image = pytest.importorskip("PIL.Image", reason="images need the images extra (Pillow)")

SIZE = (1500, 1100)  # more than COMPOSITED_PIXELS: several strips


def _whole_on_white(image: Any) -> Any:
    rgba = image.convert("RGBA")
    return Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255, 255)), rgba).convert("RGB")


def _transparent(mode: str) -> Any:
    rng = np.random.default_rng(3)
    rgba = Image.fromarray(rng.integers(0, 256, (SIZE[1], SIZE[0], 4), dtype=np.uint8), "RGBA")
    if mode == "P":
        image = rgba.convert("RGB").quantize(200)
        image.info["transparency"] = bytes(rng.integers(0, 256, 200, dtype=np.uint8))
        return image
    if mode == "L":
        image = rgba.convert("L")
        image.info["transparency"] = 7
        return image
    return rgba.convert(mode)


@pytest.mark.parametrize("mode", ["RGBA", "LA", "PA", "P", "L"])
def test_a_transparent_image_composited_by_strips_is_the_whole_image_composited(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = _transparent(mode)
    expected = _whole_on_white(image)
    composited: list[int] = []
    whole = Image.alpha_composite

    def recording(under: Any, over: Any) -> Any:
        composited.append(over.width * over.height)
        return whole(under, over)

    monkeypatch.setattr(Image, "alpha_composite", recording)
    seen = on_white(image)
    assert seen.mode == "RGB" and seen.tobytes() == expected.tobytes()
    assert len(composited) > 1 and max(composited) <= COMPOSITED_PIXELS
    assert sum(composited) == SIZE[0] * SIZE[1]


def _load_an_image_of_stripe(stripe: int) -> tuple[int, int]:
    from poolrag import image_inputs

    kept = []  # alive, so that each new image has a new identity
    while True:
        image = Image.new("RGB", (3, 2))
        if (id(image) >> 4) % len(image_inputs._LOAD_LOCKS) == stripe:
            return image_inputs.loaded(image).size
        kept.append(image)


def test_a_worker_forked_while_an_image_is_read_reads_images() -> None:
    """A ``fork`` pool started while another thread reads a picture: the worker's copy of that
    picture's read lock stayed held, and the first picture of its own that the lock covers hung."""
    from poolrag import image_inputs
    from poolrag.testing.fork_while_held import in_fork_while_held

    assert in_fork_while_held(image_inputs._LOAD_LOCKS[5], _load_an_image_of_stripe, 5, timeout=60) == (3, 2)
