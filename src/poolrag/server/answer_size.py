"""The bound on one answer's values. Per-token data (``token_embed``, ``token_classify``) is a row
per token the model read, so its answer outgrows its request: 500 inputs of 256 token ids (a 768 KB
body) answered 49 million values, 1 GB of JSON. The rows are counted once the model has read the
inputs (the tokens of a text and the width of a row are known then), before the answer is built."""

from __future__ import annotations

from poolrag.server.errors import APIError
from poolrag.server.settings import Limits


def check_answer_values(values: int, limits: Limits) -> None:
    """The 413 for an answer of more than ``limits.max_answer_values`` values."""
    if values > limits.max_answer_values:
        raise APIError(
            413,
            f"the answer would hold {values} values (tokens x width), more than this server's limit "
            f"of {limits.max_answer_values} per answer (--max-answer-values): send fewer or shorter "
            "inputs in a request",
            code="answer_too_large",
        )
