"""A dual encoder (CLIP) as one network: a batch of texts or a batch of images in, one projected
vector per input out, computed by the checkpoint's own ``get_text_features`` /
``get_image_features`` so the vectors are exactly the model's."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class DualEncoder(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.config = model.config

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        pixel_values: torch.Tensor | None = None,
        **_: Any,
    ) -> Any:
        """``pooler_output``: ``[B, projection_dim]``, for the texts or for the images."""
        if pixel_values is not None:
            return self.model.get_image_features(pixel_values=pixel_values)
        return self.model.get_text_features(input_ids=input_ids, attention_mask=attention_mask)
