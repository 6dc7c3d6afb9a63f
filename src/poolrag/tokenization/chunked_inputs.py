"""Embed inputs longer than the model's window, split into window-sized chunks (pooler_config
``enable_chunked_processing``, capped by ``max_embed_len``); the executor joins their vectors."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

from transformers import PreTrainedTokenizerBase

from poolrag.errors import InputTooLongError, InvalidInputError
from poolrag.request import PoolingRequest, ResolvedParams
from poolrag.tokenization.text_cut import bare_ids

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ChunkedRequest(PoolingRequest):
    """An embed input longer than the model's window (pooler_config ``enable_chunked_processing``).

    ``token_ids`` is the whole input; ``chunks`` are the window-sized requests that run instead.
    Each chunk carries the tokenizer's own special tokens (``[CLS] ... [SEP]``), so every chunk is
    an input the model was trained on and CLS / LAST pooling read a real position; unlike vLLM,
    which cuts the one tokenised sequence, a middle chunk therefore never lacks them. A prompt
    prefix (instruction) stays on the first chunk only. The executor joins the chunks' vectors.
    """

    chunks: tuple[PoolingRequest, ...] = ()


def special_frame(full: Sequence[int], bare: Sequence[int]) -> tuple[list[int], list[int]] | None:
    """The special tokens the tokenizer puts before and after ``bare`` to make ``full``."""
    extra = len(full) - len(bare)
    for start in range(extra + 1):
        if list(full[start : start + len(bare)]) == list(bare):
            return list(full[:start]), list(full[start + len(bare) :])
    return None


def check_embed_cap(ids: Sequence[int], max_embed_len: int | None) -> None:
    """Refuse an input longer than pooler_config ``max_embed_len`` (None: no cap)."""
    if max_embed_len is not None and len(ids) > max_embed_len:
        error = InputTooLongError(len(ids), max_embed_len)
        error.args = (
            f"input has {len(ids)} tokens, more than pooler_config max_embed_len={max_embed_len}; "
            "shorten it or pass truncate_prompt_tokens to truncate",
        )
        raise error


def chunked_request(
    tokenizer: PreTrainedTokenizerBase,
    text: str,
    ids: Sequence[int],
    params: ResolvedParams,
    max_len: int,
    uses_token_type_ids: bool,
    prompt_length: int,
) -> ChunkedRequest:
    """``text`` (tokenised whole as ``ids``) as window-sized chunks of real tokens, each framed by
    the tokenizer's special tokens; they pool unnormalised and at full size, the join applies the
    request's own settings. ``prompt_length``: the rows of the first chunk (the one that holds the
    instruction prompt) its pool leaves out (``PoolingRequest.prompt_length``)."""
    bare = bare_ids(tokenizer, text)
    frame = special_frame(ids, bare)
    window = max_len - (len(frame[0]) + len(frame[1]) if frame else 0)
    if frame is None or window < 1:
        raise InvalidInputError(
            f"input has {len(ids)} tokens, more than the model's maximum of {max_len}, "
            "and this tokenizer's output cannot be split into chunks"
        )
    head, tail = frame
    sub = replace(params, normalize=False, dimensions=None)
    chunks = []
    for start in range(0, len(bare), window):
        chunk = tuple(head + list(bare[start : start + window]) + tail)
        types = (0,) * len(chunk) if uses_token_type_ids else None
        skip = prompt_length if start == 0 else 0
        chunks.append(PoolingRequest(token_ids=chunk, params=sub, token_type_ids=types, prompt_length=skip))
    logger.debug("embedding a %d-token input as %d chunks of %d", len(ids), len(chunks), max_len)
    return ChunkedRequest(token_ids=tuple(ids), params=params, chunks=tuple(chunks))
