"""The per-request token cap on the routes that answer with token ids (``/tokenize``, in every
dialect it speaks).

The other routes cut a long text to what the model keeps before tokenising it; ``/tokenize``
answers every token, so it tokenised whatever came: one 15.7 MB prompt became 3.1 million token
records (2.9 GB of server memory, 18 s) and an answer six times past the token cap every other
route enforces. Here a long text is first counted window by window
(:meth:`~poolrag.tokenization.text_cut.TextCut.count`, one window's tokens held at a time), and the
count stops as soon as the request passes the cap: a text over it is refused with 413 after
tokenising at most the cap's worth of text, and only texts within it are tokenised whole.
A text no longer than one counting window is tokenised at once and measured afterwards (its
tokens are few enough to hold, and it is not tokenised twice).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from poolrag.server.errors import APIError
from poolrag.tokenization.text_cut import COUNT_WINDOW_CHARS, text_cut_of


def _over_cap(param: str, limit: int) -> APIError:
    return APIError(
        413,
        f"{param} holds more than {limit} tokens, this server's limit per request",
        param=param,
    )


def tokenize_within_cap(
    tokenizer: Any,
    tokenize: Callable[[str], list[int]],
    texts: Sequence[str],
    limit: int,
    param: str,
    add_special_tokens: bool = True,
) -> list[list[int]]:
    """``tokenize(text)`` of each text, or a 413 naming ``param`` when their tokens together
    (special tokens included when ``add_special_tokens``) would number more than ``limit``.

    Synchronous: call it off the event loop. ``tokenize`` is the caller's own tokenisation (ids,
    or whatever else a dialect returns per token, as long as it is a list per token).
    """
    cut = text_cut_of(tokenizer)
    specials = tokenizer.num_special_tokens_to_add(pair=False) if add_special_tokens else 0
    left = limit
    for text in texts:  # the long texts' counts first: nothing is tokenised whole before all pass
        if len(text) > COUNT_WINDOW_CHARS:
            left -= cut.count(text, stop_after=max(left - specials, 0)) + specials
            if left < 0:
                raise _over_cap(param, limit)
    answers = []
    for text in texts:
        tokens = tokenize(text)
        if len(text) <= COUNT_WINDOW_CHARS:
            left -= len(tokens)
            if left < 0:
                raise _over_cap(param, limit)
        answers.append(tokens)
    return answers
