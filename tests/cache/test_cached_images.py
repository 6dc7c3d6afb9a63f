"""The embedding cache with images (a CLIP model): an image is keyed by its bytes' digest, so the
same file read again, or sent as bytes or a data URL, is not embedded twice, and a text and an
image never share a key."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from pathlib import Path

import numpy as np
import pytest

from poolrag import Engine, PoolingParams
from poolrag.cache.embedder import CachedEmbedder
from poolrag.cache.keys import cache_namespace, image_key
from poolrag.cache.sqlite_store import EmbeddingCache
from poolrag.errors import InvalidInputError
from poolrag.testing.page_corpus import oriented_photo
from poolrag.testing.tiny_models import build_clip

pytest.importorskip("PIL.Image", reason="images need the images extra (Pillow)")
PHOTO = Path(pytest.importorskip("matplotlib").get_data_path()) / "sample_data" / "grace_hopper.jpg"


def test_an_image_is_cached_by_its_bytes(tmp_path: Path, minilm_path: Path) -> None:
    engine = Engine(build_clip(tmp_path / "clip", minilm_path))
    embedder = CachedEmbedder(engine, EmbeddingCache(tmp_path / "cache.sqlite"))
    first = embedder.embed_array([PHOTO, "a portrait"])
    assert embedder.misses == 2
    np.testing.assert_allclose(first, engine.embed_array([PHOTO, "a portrait"]), atol=1e-6)
    copy = tmp_path / "renamed.jpg"
    copy.write_bytes(PHOTO.read_bytes())
    again = embedder.embed_array([copy, PHOTO.read_bytes(), "a portrait"])
    assert embedder.misses == 2  # the same bytes under another name, or as bytes: read from the cache
    np.testing.assert_allclose(again, first[[0, 0, 1]], atol=0)
    data_url = "data:image/jpeg;base64," + base64.b64encode(PHOTO.read_bytes()).decode()
    np.testing.assert_allclose(embedder.embed_array([data_url]), first[:1], atol=1e-6)
    assert embedder.misses == 2  # the file's bytes as a data URL: the same key
    with pytest.raises(InvalidInputError, match="no image file at"):
        embedder.embed_array([tmp_path / "gone.jpg"])


@pytest.fixture(scope="module")
def clip_engine(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> Engine:
    return Engine(build_clip(tmp_path_factory.mktemp("clip") / "clip", minilm_path))


def _palette_image(colour: tuple[int, int, int]) -> object:
    from PIL import Image

    image = Image.new("P", (32, 32))  # every pixel is palette entry 0
    image.putpalette([*colour, *([0, 0, 0] * 255)])
    return image


def test_a_pil_image_is_keyed_by_the_pixels_the_engine_reads(tmp_path: Path, clip_engine: Engine) -> None:
    from PIL import Image

    # one index array under two palettes, and one RGB picture with and without a transparent
    # colour (shown on white): other pictures to the engine, so other keys
    red, blue = _palette_image((200, 30, 30)), _palette_image((30, 30, 200))
    plain = Image.new("RGB", (32, 32), (10, 120, 30))
    see_through = plain.copy()
    see_through.info["transparency"] = (10, 120, 30)
    embedder = CachedEmbedder(clip_engine, EmbeddingCache(tmp_path / "cache.sqlite"))
    for image in (red, blue, plain, see_through):
        np.testing.assert_allclose(embedder.embed_array([image]), clip_engine.embed_array([image]), atol=1e-5)
    assert embedder.misses == 4
    # the same picture in another mode is the same input to the engine: one entry
    same = embedder.embed_array([red.convert("RGB")])
    np.testing.assert_allclose(same, clip_engine.embed_array([red]), atol=1e-5)
    assert embedder.misses == 4


def test_no_text_is_answered_with_an_images_vector(tmp_path: Path, clip_engine: Engine) -> None:
    embedder = CachedEmbedder(clip_engine, EmbeddingCache(tmp_path / "cache.sqlite"))
    embedder.embed_array([PHOTO])
    # the text that spells the image's old key (a NUL, then its identity) is a text to the engine
    crafted = "\x00image-bytes:" + hashlib.sha256(PHOTO.read_bytes()).hexdigest()
    np.testing.assert_allclose(embedder.embed_array([crafted]), clip_engine.embed_array([crafted]), atol=1e-5)
    assert embedder.misses == 2


def test_a_refused_image_is_named_where_the_callers_list_has_it(tmp_path: Path, clip_engine: Engine) -> None:
    from PIL import Image

    whole = tmp_path / "whole.png"
    Image.new("RGB", (64, 64), (10, 120, 30)).save(whole)
    cut = tmp_path / "cut.png"
    cut.write_bytes(whole.read_bytes()[:60])
    embedder = CachedEmbedder(clip_engine, EmbeddingCache(tmp_path / "cache.sqlite"))
    embedder.embed_array([PHOTO])  # cached: only the rest reach the engine
    for inputs in ([PHOTO, "hello", cut], [PHOTO, "hello", tmp_path / "nope.png"]):
        with pytest.raises(InvalidInputError) as engine_error:
            clip_engine.embed_array(inputs)
        for call in (embedder.embed_array, lambda items: asyncio.run(embedder.aembed_array(items))):
            with pytest.raises(InvalidInputError) as cached_error:
                call(inputs)
            assert str(cached_error.value) == str(engine_error.value)
            assert str(cached_error.value).startswith("input[2]: ")


def test_a_phone_photo_cached_on_its_side_is_embedded_again_upright(
    tmp_path: Path, clip_engine: Engine
) -> None:
    """A cache filled before poolrag read EXIF orientations holds a phone photo's vector of the
    picture on its side under the key of its bytes. Such a photo now has a key of its own, so it is
    embedded upright; a photo without the tag keeps its key and its entry."""
    from PIL import Image

    plain, turned = oriented_photo(tmp_path / "plain.jpg", None), oriented_photo(tmp_path / "turned.jpg", 6)
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    namespace = cache_namespace(clip_engine.facts, "embed", PoolingParams())
    old_keys = [
        image_key(namespace, f"image-bytes:{hashlib.sha256(p.read_bytes()).hexdigest()}")
        for p in (plain, turned)
    ]
    # what poolrag stored before: the pixels as the file holds them, for both
    on_its_side = clip_engine.embed_array([Image.open(plain), Image.open(turned)])
    cache.put_many(dict(zip(old_keys, on_its_side, strict=True)))

    embedder = CachedEmbedder(clip_engine, cache)
    got = embedder.embed_array([plain, turned, turned.read_bytes()])
    assert (embedder.hits, embedder.misses) == (2, 1)  # the plain photo from its old entry
    upright = clip_engine.embed_array([plain, turned])
    np.testing.assert_allclose(got, upright[[0, 1, 1]], atol=1e-6)
    assert np.abs(upright[1] - on_its_side[1]).max() > 1e-3
    assert set(cache.get_many(old_keys)) == set(old_keys)  # the old entry is left, never read
