"""How many of a request's inputs were cut to the model's length, told to the caller.

Cutting is the default (as sentence-transformers, TEI and Cohere do), so an answer says when it
happened: every route that reads text sends the count in the ``X-Truncated-Inputs`` header. A
header, because the OpenAI and Cohere clients parse bodies into their own types; Cohere's answer
also carries it as a warning in ``meta.warnings``, the place Cohere's clients show one. The engine
counts the same inputs for ``/metrics`` (``poolrag_engine_truncated_inputs_total``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fastapi import Response

from poolrag.outputs import PoolingRequestOutput

TRUNCATED_INPUTS_HEADER = "X-Truncated-Inputs"


def report_truncated(response: Response, outputs: Iterable[PoolingRequestOutput[Any]]) -> int:
    """Set the header on ``response`` to the number of ``outputs`` whose input was cut; that number."""
    count = sum(out.truncated for out in outputs)
    response.headers[TRUNCATED_INPUTS_HEADER] = str(count)
    return count
