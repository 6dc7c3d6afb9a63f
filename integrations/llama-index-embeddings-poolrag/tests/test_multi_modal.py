"""PoolragMultiModalEmbedding: images and texts into one space, the engine's vectors, in process and
through poolrag serve, and LlamaIndex's own MultiModalVectorStoreIndex retrieving an image by text."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import numpy as np
import pytest
from llama_index.embeddings.poolrag import PoolragMultiModalEmbedding

from poolrag import Engine, InputTypeError, InvalidInputError


@pytest.fixture(params=["in_process", "remote"])
def embed_model(request: pytest.FixtureRequest, clip_engine: Engine) -> PoolragMultiModalEmbedding:
    if request.param == "in_process":
        return PoolragMultiModalEmbedding(engine=clip_engine)
    return PoolragMultiModalEmbedding(base_url=request.getfixturevalue("clip_url"))


def test_images_get_the_engine_s_vectors(
    embed_model: PoolragMultiModalEmbedding, clip_engine: Engine, photo_files: list[Path]
) -> None:
    want = clip_engine.embed_array(photo_files)
    one = np.array(embed_model.get_image_embedding(str(photo_files[0])), dtype=np.float32)
    np.testing.assert_allclose(one, want[0], atol=1e-6)
    batch = [photo_files[0].as_uri(), io.BytesIO(photo_files[1].read_bytes())]
    got = np.array(embed_model.get_image_embedding_batch(batch), dtype=np.float32)
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_async_images_match(embed_model: PoolragMultiModalEmbedding, photo_files: list[Path]) -> None:
    paths = [str(p) for p in photo_files]
    got = asyncio.run(embed_model.aget_image_embedding_batch(paths))
    np.testing.assert_allclose(got, embed_model.get_image_embedding_batch(paths), atol=1e-6)


def test_an_unreadable_image_is_named_by_its_place_in_the_list_not_in_its_slice(
    clip_engine: Engine, photo_files: list[Path], tmp_path: Path
) -> None:
    """LlamaIndex cuts the list into ``embed_batch_size`` slices: the bad file at place 3 was named
    ``input[1]`` of its slice; in async calls too, also with ``num_workers`` running slices at once.
    One path given as the list was read one character at a time (``no image file at /``)."""
    bad = tmp_path / "bad.png"
    bad.write_text("not an image")
    images = [*photo_files, photo_files[0], bad, photo_files[1]]
    model = PoolragMultiModalEmbedding(engine=clip_engine, embed_batch_size=2)
    with pytest.raises(InvalidInputError, match=r"^input\[3\]: not a readable image"):
        model.get_image_embedding_batch(images)
    with pytest.raises(InvalidInputError, match=r"^input\[3\]: not a readable image"):
        asyncio.run(model.aget_image_embedding_batch(images))
    workers = PoolragMultiModalEmbedding(engine=clip_engine, embed_batch_size=1, num_workers=2)
    with pytest.raises(InvalidInputError, match=r"^input\[3\]: not a readable image"):
        asyncio.run(workers.aget_image_embedding_batch(images))
    with pytest.raises(InputTypeError, match="got one string"):
        model.get_image_embedding_batch(str(photo_files[0]))  # type: ignore[arg-type]
    # and a slice that reads well still gives the engine's vectors
    np.testing.assert_allclose(
        model.get_image_embedding_batch(images[:3]), clip_engine.embed_array(images[:3]), atol=1e-6
    )


def test_a_remote_url_is_refused_not_fetched(clip_engine: Engine) -> None:
    with pytest.raises(InvalidInputError, match="never fetches"):
        PoolragMultiModalEmbedding(engine=clip_engine).get_image_embedding("https://example.com/cat.png")


def test_multi_modal_vector_store_index_retrieves_an_image_by_text(
    clip_engine: Engine, photo_files: list[Path]
) -> None:
    from llama_index.core.indices import MultiModalVectorStoreIndex
    from llama_index.core.schema import ImageNode

    embed_model = PoolragMultiModalEmbedding(engine=clip_engine)
    # image nodes as LlamaIndex's readers make them: the file, its name as the text
    nodes = [ImageNode(image_path=str(p), text=p.stem, id_=p.name) for p in photo_files]
    index = MultiModalVectorStoreIndex(nodes, embed_model=embed_model, image_embed_model=embed_model)
    query = "a gradient"
    hits = index.as_retriever(image_similarity_top_k=2).text_to_image_retrieve(query)
    cosines = clip_engine.embed_array(photo_files) @ clip_engine.embed_array([query])[0]
    order = np.argsort(-cosines)
    assert [h.node.node_id for h in hits] == [photo_files[i].name for i in order]
    np.testing.assert_allclose([h.score for h in hits], cosines[order], atol=1e-5)
