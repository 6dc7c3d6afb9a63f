"""The images decoded at once hold a bounded number of pixels: an image that does not fit beside
those being decoded waits its turn, in order of arrival; one alone always goes."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable

import pytest

from poolrag.tokenization import images
from poolrag.tokenization.pixel_budget import PixelBudget

Image = pytest.importorskip("PIL.Image", reason="images need the images extra (Pillow)")


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "the other thread never got there"
        time.sleep(0.001)


def _in_thread(budget: PixelBudget, pixels: int, entered: list[int]) -> threading.Thread:
    def hold() -> None:
        with budget.hold(pixels):
            entered.append(pixels)

    thread = threading.Thread(target=hold)
    thread.start()
    return thread


def test_one_image_alone_goes_whatever_its_size() -> None:
    budget = PixelBudget(100)
    with budget.hold(1_000):
        assert budget.held == 1_000
    assert budget.held == 0


def test_an_image_that_does_not_fit_waits_and_those_behind_it_wait_in_turn() -> None:
    budget = PixelBudget(100)
    entered: list[int] = []
    with budget.hold(60):
        big = _in_thread(budget, 50, entered)
        _until(lambda: budget.waiting == 1)
        small = _in_thread(budget, 10, entered)  # it would fit, but the big one came first
        _until(lambda: budget.waiting == 2)
        assert entered == [] and budget.held == 60
    big.join(timeout=30)
    small.join(timeout=30)
    assert entered == [50, 10] and budget.held == 0 and budget.waiting == 0


def test_decoding_an_image_holds_its_pixels_in_the_shared_budget() -> None:
    png = io.BytesIO()
    Image.new("RGBA", (300, 200)).save(png, format="PNG")
    decoded: list[tuple[int, int]] = []
    with images.DECODING.hold(images.DECODING_PIXELS):  # every pixel taken: the decode must wait
        thread = threading.Thread(target=lambda: decoded.append(images.decode_image(png.getvalue()).size))
        thread.start()
        _until(lambda: images.DECODING.waiting == 1)
        assert decoded == []
    thread.join(timeout=30)
    assert decoded == [(300, 200)] and images.DECODING.held == 0
