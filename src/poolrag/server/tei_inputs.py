"""What every TEI route reads the same way: its long-input fields as :class:`PoolingParams`' one
long-input rule, checked before the engine sees a request."""

from __future__ import annotations

from poolrag.server.errors import APIError
from poolrag.server.tei_schemas import TeiSimilarityParameters, TeiTruncation


def tei_truncate(fields: TeiTruncation | TeiSimilarityParameters) -> bool | None:
    """TEI's ``truncate`` as ``PoolingParams.truncate``: true cuts, false refuses, unset leaves it to
    the server (TEI's ``truncate.unwrap_or(auto_truncate)``). Only Right (keep the first tokens) is
    served: Left is refused whatever the input's length, as a field that changes nothing for short
    inputs would silently change long ones."""
    if fields.truncation_direction.lower() == "left":
        raise APIError(
            400,
            "truncation_direction Left is not supported: poolrag keeps a long input's first tokens (Right)",
            param="truncation_direction",
        )
    return fields.truncate
