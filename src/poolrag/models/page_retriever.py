"""A page retriever (ColPali, ColQwen2, ColModernVBERT) as one network: a batch of queries, or a
batch of pages with their pixels, in; the checkpoint's own ``embeddings`` out, one projected,
normalised vector per position.

The model's forward already projects and normalises every position and zeroes the padded ones; the
token head keeps the attended positions of each row, as the model's reference scoring does. Where
the processor gives ``token_type_ids`` they are passed on: PaliGemma (ColPali) builds its attention
from them, and without them a query's vectors would depend on the padding of its batch.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from transformers.modeling_outputs import BaseModelOutput


class PageRetriever(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.config = model.config

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        pixel_values: torch.Tensor | None = None,
        image_grid_thw: torch.Tensor | None = None,
        pixel_attention_mask: torch.Tensor | None = None,
        **_: Any,
    ) -> BaseModelOutput:
        """``last_hidden_state``: ``[B, T, embedding_dim]``, the model's ``embeddings``."""
        # one forward per batch: a key-value cache would be built for nothing
        inputs: dict[str, Any] = {"input_ids": input_ids, "attention_mask": attention_mask}
        inputs["use_cache"] = False
        if token_type_ids is not None:  # PaliGemma: the prefix its processor marks attends both ways
            inputs["token_type_ids"] = token_type_ids
        if pixel_values is not None:
            inputs["pixel_values"] = pixel_values.to(self.model.dtype)
        if image_grid_thw is not None:  # ColQwen2: each page's patch grid
            inputs["image_grid_thw"] = image_grid_thw
        if pixel_attention_mask is not None:  # ColModernVBERT: each page's tiles
            inputs["pixel_attention_mask"] = pixel_attention_mask
        return BaseModelOutput(last_hidden_state=self.model(**inputs).embeddings)
