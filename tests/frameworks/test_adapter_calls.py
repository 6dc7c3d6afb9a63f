"""The calls behind both frameworks' embedding classes: a list sent in pieces (a progress bar's, a
store's ``add_images`` of thousands) still names a refused input where the caller's list has it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from poolrag import Engine, PoolingParams
from poolrag.errors import InputTypeError, InvalidImageError, InvalidTextError
from poolrag.frameworks import adapter_calls
from poolrag.frameworks.adapter_calls import (
    IMAGE_PIECE,
    aembed_images,
    aembed_texts,
    embed_images,
    embed_texts,
)
from poolrag.testing.tiny_models import build_clip

PIL = pytest.importorskip("PIL.Image", reason="images need the images extra (Pillow)")


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> Engine:
    return Engine(build_clip(tmp_path_factory.mktemp("clip"), minilm_path))


def test_a_bad_image_past_the_first_piece_is_named_at_its_place(clip: Engine, tmp_path: Path) -> None:
    good, bad = tmp_path / "red.png", tmp_path / "cut.png"
    PIL.new("RGB", (16, 16), "red").save(good)
    bad.write_bytes(good.read_bytes()[:40])  # a truncated PNG
    uris = [str(good)] * (IMAGE_PIECE + 6) + [str(bad)]
    where = rf"^input\[{IMAGE_PIECE + 6}\]: "
    with pytest.raises(InvalidImageError, match=where):
        embed_images(clip, uris, PoolingParams())
    with pytest.raises(InvalidImageError, match=where):
        asyncio.run(aembed_images(clip, uris, PoolingParams()))


def test_an_empty_text_past_the_first_progress_piece_is_named_at_its_place(
    minilm_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(adapter_calls, "PROGRESS_PIECE", 4)
    texts = [f"text {i}" for i in range(10)]
    texts[9] = " "
    with pytest.raises(InvalidTextError, match=r"^input\[9\] is empty"):
        embed_texts(minilm_engine, texts, PoolingParams(), progress=True)
    with pytest.raises(InvalidTextError, match=r"^input\[9\] is empty"):
        asyncio.run(aembed_texts(minilm_engine, texts, PoolingParams(), progress=True))


def test_one_image_path_not_in_a_list_is_told_to_be_a_list(clip: Engine) -> None:
    """Not the texts' advice to embed it as a query, which would embed the path as text."""
    with pytest.raises(InputTypeError, match=r"pass a list of image paths or URIs, even for one image"):
        embed_images(clip, "/tmp/photo.png", PoolingParams())


def test_any_iterable_of_texts_is_embedded_as_huggingface_embeddings_takes_it(minilm_engine: Engine) -> None:
    texts = ["whales sing", "compilers compile"]
    expected = embed_texts(minilm_engine, texts, PoolingParams())
    assert embed_texts(minilm_engine, (t for t in texts), PoolingParams()) == expected
    assert asyncio.run(aembed_texts(minilm_engine, iter(tuple(texts)), PoolingParams())) == expected
    for bad, named in (("whales sing", "got one string"), ({"a": 1}, "not dict"), (3, "not int")):
        with pytest.raises(InputTypeError, match=f"expected a list of strings, {named}"):
            embed_texts(minilm_engine, bad, PoolingParams())
