"""``PoolingParams``: the per-call knobs and the names vLLM gives them."""

from __future__ import annotations

import dataclasses

import pytest

from poolrag import PoolingParams
from poolrag.errors import InvalidInputError


def test_activation_is_vllms_alias_of_use_activation() -> None:
    """Issue 30, item 7: "``PoolingParams(activation=...)`` is a TypeError"."""
    assert PoolingParams(activation=False) == PoolingParams(use_activation=False)
    assert PoolingParams(activation=True).use_activation is True
    assert PoolingParams(activation=False, use_activation=False).use_activation is False
    assert "activation" not in {
        f.name for f in dataclasses.fields(PoolingParams)
    }  # no field of its own: cache keys do not move
    with pytest.raises(InvalidInputError, match="activation and use_activation disagree"):
        PoolingParams(activation=True, use_activation=False)
    # copies keep the value (the alias is read once, at construction)
    assert PoolingParams(activation=False).with_updates(dimensions=8).use_activation is False
