"""What the network the runner calls returns: the head a checkpoint's own forward applies, if any.

Every other head (Matryoshka, ColBERT, sparse, a decoder's ``score``, lm_head rows) runs after
pooling, in the poolers a model kind's recipe (``core.recipes``) builds. So the layers below the
poolers (the native encoder, the loaders, the runner, the compiler) need only this, never the kind.
"""

from __future__ import annotations

from enum import Enum


class NetworkHead(Enum):
    NONE = "hidden_states"  # the backbone alone: ``last_hidden_state``, one row per token
    SEQUENCE = "sequence_logits"  # ``*ForSequenceClassification``: one row of logits per sequence
    TOKEN = "token_logits"  # ``*ForTokenClassification``: one row of logits per token
    # a dual encoder's own pooling and projection (CLIP's ``get_text_features`` /
    # ``get_image_features``): one vector per text or image, in ``pooler_output``
    PROJECTED = "projected_vectors"

    @property
    def packable(self) -> bool:
        """Its output is per-token rows, so packed batches give the padded batch's answer; a
        sequence head reads fixed positions of padded rows."""
        return self in (NetworkHead.NONE, NetworkHead.TOKEN)
