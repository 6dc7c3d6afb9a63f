"""Encoder-decoder checkpoints: which run their encoder alone, and which are refused at load.

Loading the whole model is wrong for both kinds: a full T5 carries a decoder no embedder runs, and
``BartModel``'s output is the decoder's first position. sentence-transformers runs T5-family
embedders (sentence-T5, GTR) as their encoder alone, and transformers names that encoder for each
such ``model_type`` in its text-encoding table (``T5EncoderModel``, ``MT5EncoderModel``,
``UMT5EncoderModel``, ...): those run encoder-only, as embedders. Every other encoder-decoder (BART,
mBART, Pegasus, and T5 with a task head) is refused at load: their pooling convention (BART's
pooling reads the decoder) is not one poolrag reproduces, and running them anyway would answer with
plausible, wrong vectors.
"""

from __future__ import annotations

import functools

from transformers import PretrainedConfig

from poolrag.config.registry import Role
from poolrag.errors import ModelLoadError


@functools.cache
def _tables() -> tuple[frozenset[str], dict[str, str]]:
    """transformers' encoder-decoder model types (its seq2seq table) and, of those, the ones whose
    encoder it implements alone (its text-encoding table: ``t5`` -> ``T5EncoderModel``, ...)."""
    from transformers.models.auto import modeling_auto

    seq2seq = frozenset(modeling_auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES)
    encoders = {t: c for t, c in modeling_auto.MODEL_FOR_TEXT_ENCODING_MAPPING_NAMES.items() if t in seq2seq}
    return seq2seq, encoders


def runs_encoder_only(architecture: str, hf_config: PretrainedConfig, role: Role) -> bool:
    """True for an encoder-decoder whose encoder poolrag runs alone; an error for the others;
    False for every model that is not an encoder-decoder. (A saved ``T5EncoderModel`` writes
    ``is_encoder_decoder: false``, so the model type decides, not that flag.)"""
    seq2seq, encoders = _tables()
    model_type = str(getattr(hf_config, "model_type", ""))
    if model_type not in seq2seq and not getattr(hf_config, "is_encoder_decoder", False):
        return False
    if model_type in encoders and role is Role.BACKBONE:
        return True
    raise ModelLoadError(
        f"{architecture} ({model_type}) is an encoder-decoder model; poolrag runs only the encoder of "
        f"T5-family embedders ({', '.join(sorted(encoders.values()))}) and refuses other "
        "encoder-decoders rather than pool a decoder"
    )
