"""A corpus where only the sparse leg of hybrid search finds the answer, for the adapters' hybrid tests.

The query names a build code that one document holds and no other shares a token with; MiniLM's
dense vectors rank two firmware documents above it (checked by ``dense_misses_rare_document``),
so hybrid search returns it first only if the sparse vectors reached the store and were searched.
"""

from __future__ import annotations

import numpy as np

from poolrag import Engine, PoolingParams

TEXTS = [
    "The release notes of every pump firmware update list the fixes it brings.",
    "Our support team answers billing questions within one business day.",
    "Install firmware updates on the pump controller from the service menu.",
    "The hiking trail climbs through pine forest to a glacier lake.",
    "Build QZ7749 changes the default baud rate of the serial port.",
    "Employees can book meeting rooms through the internal calendar.",
    "The recipe needs two cups of flour, butter and a pinch of salt.",
    "Shipping to overseas customers takes between five and ten days.",
]
QUERY = "QZ7749 pumps software upgrade"
RARE = TEXTS[4]


def dense_misses_rare_document(engine: Engine) -> bool:
    """Whether the dense leg alone puts another document first (the premise of the hybrid tests)."""
    docs = engine.embed_array(TEXTS, PoolingParams(input_type="document"))
    query = engine.embed_array([QUERY], PoolingParams(input_type="query"))[0]
    return TEXTS[int(np.argmax(docs @ query))] != RARE
