"""LlamaIndex ``MultiModalEmbedding`` on poolrag: texts and images into one space (a CLIP folder),
what ``MultiModalVectorStoreIndex`` embeds image documents and text-to-image queries with."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.embeddings.base import Embedding
from llama_index.core.embeddings.multi_modal_base import MultiModalEmbedding
from llama_index.embeddings.poolrag.base import PoolragEmbedding
from llama_index.embeddings.poolrag.slices import slice_named, slices_counted

from poolrag.frameworks.adapter_calls import aembed_images, embed_images, require_list


class PoolragMultiModalEmbedding(PoolragEmbedding, MultiModalEmbedding):
    """:class:`PoolragEmbedding` that also embeds images: a path, a ``file://`` URI, a data URL or a
    ``BytesIO`` (LlamaIndex's ``ImageType``), never a remote URL. Images get the same pooling
    parameters as documents (normalised, Matryoshka ``dimensions``), without a text prompt.

    Example:
        .. code-block:: python

            embed_model = PoolragMultiModalEmbedding(model_name="openai/clip-vit-base-patch32")
            index = MultiModalVectorStoreIndex.from_documents(documents, image_embed_model=embed_model)
    """

    @classmethod
    def class_name(cls) -> str:
        return "PoolragMultiModalEmbedding"

    def _image_params(self) -> Any:
        return self._params("document").with_updates(prompt=None, input_type=None)

    def get_image_embedding_batch(
        self, img_file_paths: list[Any], show_progress: bool = False
    ) -> list[Embedding]:
        """LlamaIndex's ``embed_batch_size`` slices, with an image the engine cannot read named by
        its place in ``img_file_paths`` (``input[300]``), not in its slice (``input[44]``); one path
        given as the list is refused (it would be read one character at a time: ``no image file at /``)."""
        images = require_list(img_file_paths, "use get_image_embedding for one image")
        with slices_counted():
            return super().get_image_embedding_batch(images, show_progress)

    async def aget_image_embedding_batch(
        self, img_file_paths: list[Any], show_progress: bool = False
    ) -> list[Embedding]:
        images = require_list(img_file_paths, "use aget_image_embedding for one image")
        with slices_counted():
            return await super().aget_image_embedding_batch(images, show_progress)

    def _get_image_embedding(self, img_file_path: Any) -> Embedding:
        return embed_images(self.backend, [img_file_path], self._image_params())[0]

    async def _aget_image_embedding(self, img_file_path: Any) -> Embedding:
        return (await aembed_images(self.backend, [img_file_path], self._image_params()))[0]

    def _get_image_embeddings(self, img_file_paths: list[Any]) -> list[Embedding]:
        with slice_named(len(img_file_paths)):
            return embed_images(self.backend, img_file_paths, self._image_params())

    async def _aget_image_embeddings(self, img_file_paths: list[Any]) -> list[Embedding]:
        with slice_named(len(img_file_paths)):  # before any await (see slices)
            return await aembed_images(self.backend, img_file_paths, self._image_params())
