"""PoolragEmbeddings.embed_image, OpenCLIPEmbeddings' method that vector stores' add_images call:
images into the texts' space, the engine's own vectors, in process and through poolrag serve."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from langchain_poolrag import PoolragEmbeddings

from poolrag import Engine, InputTypeError, InvalidInputError


@pytest.fixture(params=["in_process", "remote"])
def embeddings(request: pytest.FixtureRequest, clip_engine: Engine) -> PoolragEmbeddings:
    if request.param == "in_process":
        return PoolragEmbeddings(engine=clip_engine)
    return PoolragEmbeddings(base_url=request.getfixturevalue("clip_url"))


def test_embed_image_gives_the_engine_s_image_vectors(
    embeddings: PoolragEmbeddings, clip_engine: Engine, photo_files: list[Path]
) -> None:
    uris = [str(photo_files[0]), photo_files[1].as_uri()]
    got = np.array(embeddings.embed_image(uris), dtype=np.float32)
    np.testing.assert_allclose(got, clip_engine.embed_array(photo_files), atol=1e-6)
    # a caption lands in the same space, through the text methods
    caption = np.array(embeddings.embed_query("a gradient"), dtype=np.float32)
    np.testing.assert_allclose(caption, clip_engine.embed_array(["a gradient"])[0], atol=1e-6)


async def test_aembed_image_matches(embeddings: PoolragEmbeddings, photo_files: list[Path]) -> None:
    uris = [str(p) for p in photo_files]
    np.testing.assert_allclose(await embeddings.aembed_image(uris), embeddings.embed_image(uris), atol=1e-6)


def test_a_remote_url_is_refused_not_fetched(clip_engine: Engine) -> None:
    with pytest.raises(InvalidInputError, match=r"never fetches 'https://example\.com/cat\.png'"):
        PoolragEmbeddings(engine=clip_engine).embed_image(["https://example.com/cat.png"])


def test_a_text_only_model_refuses_images(minilm_engine: Engine, photo_files: list[Path]) -> None:
    with pytest.raises(InputTypeError, match="reads text only, not images"):
        PoolragEmbeddings(engine=minilm_engine).embed_image([str(photo_files[0])])
