"""A dual encoder (CLIP, SigLIP, SigLIP2) as one network: a batch of texts or a batch of images in, one
projected vector per input out, computed by the checkpoint's own ``get_text_features`` /
``get_image_features`` so the vectors are exactly the model's.

SigLIP's text tower pools its last position and was trained on texts padded to its full length,
every position attended (what its processor's ``padding="max_length"`` gives): its texts are
given to it that way, so a short text's vector does not depend on the batch it came in.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

#: model types whose text tower reads texts padded to its whole length (without a mask)
FULL_LENGTH_TEXT = frozenset({"siglip", "siglip2"})


class DualEncoder(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.config = model.config
        text = model.config.get_text_config()
        full = model.config.model_type in FULL_LENGTH_TEXT
        self.text_length = int(text.max_position_embeddings) if full else None
        self.pad_token_id = int(getattr(text, "pad_token_id", None) or 0)

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        pixel_values: torch.Tensor | None = None,
        pixel_attention_mask: torch.Tensor | None = None,
        spatial_shapes: torch.Tensor | None = None,
        **_: Any,
    ) -> Any:
        """``pooler_output``: ``[B, projection_dim]``, for the texts or for the images (SigLIP2's at
        their own aspect ratio: each image's patches, their mask and its patch grid)."""
        if pixel_values is not None:
            if spatial_shapes is not None:
                return self.model.get_image_features(
                    pixel_values=pixel_values,
                    pixel_attention_mask=pixel_attention_mask,
                    spatial_shapes=spatial_shapes,
                )
            return self.model.get_image_features(pixel_values=pixel_values)
        if self.text_length is not None and input_ids is not None:
            padded = input_ids.new_full((input_ids.shape[0], self.text_length), self.pad_token_id)
            if attention_mask is not None:
                input_ids = input_ids.masked_fill(attention_mask == 0, self.pad_token_id)
            padded[:, : input_ids.shape[1]] = input_ids
            input_ids, attention_mask = padded, None
        return self.model.get_text_features(input_ids=input_ids, attention_mask=attention_mask)
