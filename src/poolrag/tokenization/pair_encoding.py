"""Text pairs tokenised with each distinct text encoded once: called with the pairs, a tokenizer
encodes a rerank's query again beside every document (a 3 MB query that no cut shortens takes 1.4 s
a document, holding the model's tokenizer).

A fast tokenizer encodes a pair as its two texts encoded alone, then truncated and framed by its
special tokens together (the Rust tokenizer's ``post_process``). :func:`encode_pairs` makes those
same calls, with each distinct first text encoded once, under the settings a Hugging Face call
would set (truncation, no padding, special tokens in the text read as such); a second text is
encoded behind an empty first, so it carries a second text's type ids. A tokenizer whose pairs
come out otherwise on probe pairs (a slow tokenizer, a class that reworks a call) is called with
the pairs.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from transformers import BatchEncoding, PreTrainedTokenizerBase

from poolrag.tokenization.tokenizer_lock import call_tokenizer, tokenizer_lock

logger = logging.getLogger(__name__)

#: Probe pairs and limits: short and long firsts, one first shared by two pairs, cut one side or
#: both, an odd and an even limit.
_PROBES = (
    ("a query", "a document about it, naïve 日本 words"),
    ("a query", "another"),
    ("one two three four five six seven eight nine", "ten"),
    ("the same length here", "the same length there"),
)
_PROBE_LIMITS = (None, 7, 8)

_VERDICTS: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
_VERDICTS_LOCK = threading.Lock()


def encode_pairs(
    tokenizer: PreTrainedTokenizerBase,
    firsts: Sequence[str],
    seconds: Sequence[str],
    limit: int | None,
    type_ids: bool,
) -> Any:
    """What ``tokenizer(firsts, seconds)`` gives with special tokens, truncated ``longest_first``
    to ``limit`` tokens (``None``: not truncated): ``input_ids``, ``token_type_ids`` when asked for,
    and the fast tokenizer's ``encodings``."""
    if not _assembles_pairs(tokenizer):
        return _called(tokenizer, firsts, seconds, limit, type_ids)
    return _assembled(tokenizer, firsts, seconds, limit, type_ids)


def _called(
    tokenizer: PreTrainedTokenizerBase,
    firsts: Sequence[str],
    seconds: Sequence[str],
    limit: int | None,
    type_ids: bool,
) -> Any:
    return call_tokenizer(
        tokenizer,
        list(firsts),
        list(seconds),
        add_special_tokens=True,
        truncation="longest_first" if limit is not None else False,
        max_length=limit,
        return_token_type_ids=type_ids,
        return_attention_mask=False,
    )


def _assembled(
    tokenizer: PreTrainedTokenizerBase,
    firsts: Sequence[str],
    seconds: Sequence[str],
    limit: int | None,
    type_ids: bool,
) -> BatchEncoding:
    backend = tokenizer.backend_tokenizer
    distinct = list(dict.fromkeys(firsts))
    with tokenizer_lock(tokenizer):
        # the backend's settings are the tokenizer's, shared with whoever calls it next: set for
        # these pairs, then put back as they were
        truncation, padding, specials = backend.truncation, backend.padding, backend.encode_special_tokens
        try:
            backend.no_truncation()
            backend.no_padding()
            backend.encode_special_tokens = getattr(tokenizer, "split_special_tokens", False)
            alone = dict(zip(distinct, backend.encode_batch(distinct, add_special_tokens=False), strict=True))
            # each second text encoded as a pair's second (its type ids), behind an empty first
            second = backend.encode_batch([("", text) for text in seconds], add_special_tokens=False)
            if limit is not None:
                backend.enable_truncation(
                    max_length=limit, stride=0, strategy="longest_first", direction=tokenizer.truncation_side
                )
            pairs = [
                backend.post_process(alone[first], encoded, add_special_tokens=True)
                for first, encoded in zip(firsts, second, strict=True)
            ]
        finally:
            _restore(backend, truncation, padding, specials)
    data = {"input_ids": [pair.ids for pair in pairs]}
    if type_ids:
        data["token_type_ids"] = [pair.type_ids for pair in pairs]
    return BatchEncoding(data, pairs)


def _restore(backend: Any, truncation: dict | None, padding: dict | None, specials: bool) -> None:
    """The backend's truncation, padding and special-token switch as they were before."""
    if truncation is None:
        backend.no_truncation()
    else:
        backend.enable_truncation(**truncation)
    if padding is None:
        backend.no_padding()
    else:
        backend.enable_padding(**padding)
    backend.encode_special_tokens = specials


def _assembles_pairs(tokenizer: PreTrainedTokenizerBase) -> bool:
    """Whether :func:`_assembled` gives ``tokenizer``'s own pairs (ids and type ids) on the probes;
    found once per tokenizer."""
    with _VERDICTS_LOCK:
        verdict = _VERDICTS.get(tokenizer)
    if verdict is None:
        verdict = _same_on_probes(tokenizer)
        if not verdict:
            logger.debug("this tokenizer's pairs are tokenised pair by pair (no shared encoding)")
        with _VERDICTS_LOCK:
            _VERDICTS[tokenizer] = verdict
    return verdict


def _same_on_probes(tokenizer: PreTrainedTokenizerBase) -> bool:
    if not tokenizer.is_fast or getattr(tokenizer, "backend_tokenizer", None) is None:
        return False
    firsts = [first for first, _ in _PROBES]
    seconds = [second for _, second in _PROBES]
    try:
        for limit in _PROBE_LIMITS:
            called = _called(tokenizer, firsts, seconds, limit, type_ids=True)
            assembled = _assembled(tokenizer, firsts, seconds, limit, type_ids=True)
            for key in ("input_ids", "token_type_ids"):
                if called.get(key) != assembled[key]:
                    return False
    except Exception:  # an unusual tokenizer: called with the pairs
        return False
    return True
