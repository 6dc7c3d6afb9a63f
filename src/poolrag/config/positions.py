"""Where a model family starts numbering positions.

RoBERTa-style models number real tokens from ``padding_idx + 1`` (positions up to the padding
index are reserved), so position ids built by poolrag must carry that offset; BERT starts at 0.
"""

from __future__ import annotations

from typing import Any

_OFFSET_TYPES = {"roberta", "xlm-roberta", "camembert", "data2vec-text", "xlm-roberta-xl"}


def position_offset(config: Any) -> int:
    """The first position id of a sequence for ``config``'s family."""
    if getattr(config, "model_type", "") not in _OFFSET_TYPES:
        return 0
    pad = getattr(config, "pad_token_id", None)
    return (1 if pad is None else int(pad)) + 1
