"""LlamaIndex ``MultiModalEmbedding`` on poolrag: texts and images into one space (a CLIP folder),
what ``MultiModalVectorStoreIndex`` embeds image documents and text-to-image queries with."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.embeddings.base import Embedding
from llama_index.core.embeddings.multi_modal_base import MultiModalEmbedding
from llama_index.embeddings.poolrag.base import PoolragEmbedding

from poolrag.frameworks.adapter_calls import aembed_images, embed_images


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

    def _get_image_embedding(self, img_file_path: Any) -> Embedding:
        return embed_images(self.backend, [img_file_path], self._image_params())[0]

    async def _aget_image_embedding(self, img_file_path: Any) -> Embedding:
        return (await aembed_images(self.backend, [img_file_path], self._image_params()))[0]

    def _get_image_embeddings(self, img_file_paths: list[Any]) -> list[Embedding]:
        return embed_images(self.backend, img_file_paths, self._image_params())

    async def _aget_image_embeddings(self, img_file_paths: list[Any]) -> list[Embedding]:
        return await aembed_images(self.backend, img_file_paths, self._image_params())
