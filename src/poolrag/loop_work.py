"""One rule for what an asyncio caller's event loop does itself and what it hands to a thread.

A hop to a worker thread costs the loop tens of microseconds (waking the worker, handing over the
GIL, the result's way back), and more under load; work that costs less is cheaper done in place,
while larger work done in place stalls every other connection. So each piece of a request's work
that the loop could do (parsing its body, tokenising its texts, encoding its answer) is estimated
from its size at rates measured on a 2-core EPYC (``benchmarks/loop_costs.py``, in
``benchmarks/RESULTS.md``) and stays on the loop while the estimate is within :data:`LOOP_BUDGET_US`.
Images always leave it: decoding one takes milliseconds. The engine's async methods and the
server's routes both ask :func:`stays_on_loop`.
"""

from __future__ import annotations

#: The loop's time one piece of work may take in place. An idle hop costs 63 µs, but a busy
#: server's costs more (the worker waits for the GIL the loop holds): served at 16 and 64
#: connections, a 60 µs budget lost 8-18% of the requests/s to hops, 300 µs none.
LOOP_BUDGET_US = 300.0
#: What each unit of work costs the loop, in microseconds (all-MiniLM-L6-v2's tokenizer).
US_PER_BODY_BYTE = 0.002  # json.loads and pydantic validation
US_PER_TEXT = 15.0  # the tokenizer call and the request around one input
US_PER_TEXT_CHAR = 0.2  # tokenising, per character
US_PER_ANSWER_VALUE = 0.015  # orjson, per float of an answer


def stays_on_loop(
    *, body_bytes: int = 0, text_chars: int = 0, texts: int = 0, answer_values: int = 0, images: int = 0
) -> bool:
    """Whether work of this size is done on the event loop rather than handed to a thread."""
    if images:
        return False
    cost = (
        body_bytes * US_PER_BODY_BYTE
        + text_chars * US_PER_TEXT_CHAR
        + texts * US_PER_TEXT
        + answer_values * US_PER_ANSWER_VALUE
    )
    return cost <= LOOP_BUDGET_US
