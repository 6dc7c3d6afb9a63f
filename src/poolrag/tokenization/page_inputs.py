"""Queries and pages as a page retriever's own processor prepares them (ColPali).

A page retriever reads a page as its image tokens plus a visual prompt, and a query as a prompt,
the query and augmentation tokens the model was trained to attend to; its processor
(``processor_config.json``) writes both, and nothing here re-implements them. A page is decoded
within the same limits as any image (:func:`~poolrag.tokenization.images.decoded`); each
request keeps the attended positions the processor gave, so padding never reaches the model.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np

from poolrag.errors import InputTooLongError, InvalidImageError, ModelLoadError
from poolrag.request import Pixels, PoolingRequest, ResolvedParams
from poolrag.tokenization.images import ImagePreprocessor, decoded, pillow


class PagePreprocessor(ImagePreprocessor):
    """Pages (images) and queries (texts) for a page retriever, by the folder's own processor."""

    def __init__(self, processor: Any, max_len: int | None = None) -> None:
        super().__init__(processor, patch_size=1, class_token=False)
        self.max_len = max_len

    @classmethod
    def from_folder(
        cls, folder: str | Path, patch_size: int = 1, class_token: bool = False, *, max_len: int | None = None
    ) -> PagePreprocessor:
        from transformers import AutoProcessor

        pillow()  # one line naming the images extra when Pillow is missing
        try:
            # PIL: no torchvision needed; never the folder's own code
            processor = AutoProcessor.from_pretrained(folder, backend="pil", trust_remote_code=False)
        except (OSError, ValueError) as exc:
            raise ModelLoadError(
                f"{folder}: no processor to prepare pages and queries with ({exc})"
            ) from None
        if not hasattr(processor, "process_queries") or not hasattr(processor, "process_images"):
            raise ModelLoadError(f"{folder}: {type(processor).__name__} is not a page retriever's processor")
        return cls(processor, max_len)

    def request(self, value: object, params: ResolvedParams, name: str) -> PoolingRequest:
        with decoded(value, name) as image:
            try:
                encoded = self.processor.process_images(images=[image], return_tensors="pt")
            except ValueError as exc:  # the processor's own bounds (ColQwen2: aspect ratio under 200)
                raise InvalidImageError(name, f"this model's processor cannot prepare it ({exc})") from None
        ids = _attended(encoded, 0)
        types = _attended(encoded, 0, "token_type_ids")
        values = encoded["pixel_values"][0].float().numpy()
        grid = tile_mask = None
        if "image_grid_thw" in encoded:  # dynamic resolution (ColQwen2): the grid's rows of patches
            grid = tuple(int(n) for n in encoded["image_grid_thw"][0])
            values = values[: int(np.prod(grid))]
        if "pixel_attention_mask" in encoded:  # tiles (ColModernVBERT): each tile's pixel mask
            tile_mask = encoded["pixel_attention_mask"][0].numpy()
        digest = hashlib.sha256(np.ascontiguousarray(values).data).hexdigest()
        pixels = Pixels(digest, values, len(ids), grid, tile_mask)
        return PoolingRequest(token_ids=ids, params=params, token_type_ids=types, pixels=pixels)

    def queries(self, texts: Sequence[str], params: ResolvedParams) -> list[PoolingRequest]:
        """One request per query: the processor's prompt, the query and its augmentation tokens."""
        encoded = self.processor.process_queries(text=list(texts), return_tensors="pt")
        requests = []
        for row in range(len(texts)):
            ids = _attended(encoded, row)
            if self.max_len is not None and len(ids) > self.max_len:
                raise InputTooLongError(len(ids), self.max_len)
            types = _attended(encoded, row, "token_type_ids")
            requests.append(PoolingRequest(token_ids=ids, params=params, token_type_ids=types))
        return requests


@overload
def _attended(encoded: Any, row: int) -> tuple[int, ...]: ...
@overload
def _attended(encoded: Any, row: int, key: str) -> tuple[int, ...] | None: ...
def _attended(encoded: Any, row: int, key: str = "input_ids") -> tuple[int, ...] | None:
    """Row ``row`` of ``encoded[key]`` (the token ids, or their types where the processor gives
    them) at the positions its attention mask keeps: padding dropped; the augmentation tokens a query
    attends to are the pad token, so the mask, not the id, decides."""
    if key not in encoded:
        return None
    values = np.asarray(encoded[key][row])
    mask = np.asarray(encoded["attention_mask"][row]).astype(bool)
    return tuple(int(v) for v in values[mask])
