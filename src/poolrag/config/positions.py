"""Where a model family starts numbering positions, and so how many positions a text may use.

RoBERTa-style models number real tokens from ``padding_idx + 1`` (the positions up to the padding
index are reserved), so position ids built by poolrag must carry that offset and the usable
length is ``max_position_embeddings`` minus it; BERT starts at 0. MPNet numbers its positions the
RoBERTa way too, but transformers' ``MPNetEmbeddings`` fixes its padding index at 1 whatever the
config's ``pad_token_id`` says, so an MPNet always starts at 2. This is the one list of such
families: the runner, the native modules and the length limits all read it here.
"""

from __future__ import annotations

from typing import Any

OFFSET_MODEL_TYPES = frozenset(
    {
        "roberta",
        "xlm-roberta",
        "xlm-roberta-xl",
        "camembert",
        "data2vec-text",
        "mpnet",
        "roberta-prelayernorm",
        "xmod",
        "ibert",
        "longformer",
        "luke",
    }
)
# families whose modelling code hard-codes the padding index instead of reading pad_token_id
_FIXED_PADDING_INDEX = {"mpnet": 1}


def position_offset(config: Any) -> int:
    """The first position id of a sequence for ``config``'s family."""
    model_type = getattr(config, "model_type", "")
    if model_type not in OFFSET_MODEL_TYPES:
        return 0
    pad = _FIXED_PADDING_INDEX.get(model_type, getattr(config, "pad_token_id", None))
    return (1 if pad is None else int(pad)) + 1


def usable_positions(config: Any) -> int | None:
    """How many tokens one sequence may hold: the position table less the reserved ids (``None``
    when the config has no absolute position table, e.g. rotary decoders)."""
    table = getattr(config, "max_position_embeddings", None)
    if table is None and hasattr(config, "get_text_config"):  # a multimodal config: its text model's
        config = config.get_text_config()
        table = getattr(config, "max_position_embeddings", None)
    if table is None or int(table) <= 0:  # XLNet's -1: relative positions, no table
        return None
    return int(table) - position_offset(config)
