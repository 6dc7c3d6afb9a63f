"""How many of a request's inputs were cut to the model's length, told to the caller.

Cutting is the default (as sentence-transformers, TEI and Cohere do), so an answer says when it
happened: every route that reads text sends the count in the ``X-Truncated-Inputs`` header. A
header, because the OpenAI and Cohere clients parse bodies into their own types; Cohere's answer
also carries it as a warning in ``meta.warnings``, the place Cohere's clients show one. The engine
counts the same inputs for ``/metrics`` (``poolrag_engine_truncated_inputs_total``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from fastapi import Response

from poolrag.outputs import PoolingRequestOutput

TRUNCATED_INPUTS_HEADER = "X-Truncated-Inputs"


def report_truncated(
    response: Response, outputs: Iterable[PoolingRequestOutput[Any]], cut_before: Sequence[bool] = ()
) -> int:
    """Set the header on ``response`` to the number of ``outputs`` whose input was cut; that number.
    ``cut_before``: per output, whether its input was already cut before the engine (``/score`` and
    ``/rerank``'s ``max_tokens_per_*``), which the engine cannot know; an input cut twice counts once."""
    count = sum(out.truncated or (i < len(cut_before) and cut_before[i]) for i, out in enumerate(outputs))
    response.headers[TRUNCATED_INPUTS_HEADER] = str(count)
    return count


def pairs_cut(firsts_cut: Sequence[bool], seconds_cut: Sequence[bool]) -> list[bool]:
    """Whether each pair of a 1:1, 1:N or N:N scoring lost text from either side (a lone first text
    is paired with every second one)."""
    return [firsts_cut[i if len(firsts_cut) > 1 else 0] or second for i, second in enumerate(seconds_cut)]
