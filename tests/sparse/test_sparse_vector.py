"""SparseVector: the sorted index/value form both stores take, validated and immutable."""

from __future__ import annotations

import numpy as np
import pytest

from poolrag.errors import InvalidInputError
from poolrag.sparse import SparseVector


def test_from_dict_sorts_and_round_trips() -> None:
    vector = SparseVector.from_dict({30: 0.5, 2: 1.25, 7: 0.0})
    assert vector.indices.tolist() == [2, 7, 30]
    assert vector.values.tolist() == [1.25, 0.0, 0.5]
    assert (vector.indices.dtype, vector.values.dtype) == (np.int32, np.float32)
    assert vector.to_dict() == {2: 1.25, 7: 0.0, 30: 0.5}
    assert len(vector) == 3
    assert SparseVector.from_dict(vector.to_dict()) == vector


def test_arrays_are_copied_and_read_only() -> None:
    indices = np.array([1, 4], dtype=np.int64)
    vector = SparseVector(indices, np.array([1.0, 2.0]))
    indices[0] = 3
    assert vector.indices.tolist() == [1, 4]
    with pytest.raises(ValueError):
        vector.values[0] = 9.0


def test_dot_is_the_inner_product_over_shared_ids() -> None:
    a = SparseVector.from_dict({1: 2.0, 5: 3.0, 9: 1.0})
    b = SparseVector.from_dict({5: 0.5, 9: 4.0, 12: 7.0})
    assert a.dot(b) == pytest.approx(3.0 * 0.5 + 1.0 * 4.0)
    assert a.dot(SparseVector.empty()) == 0.0


def test_equality_and_hash_follow_contents() -> None:
    a = SparseVector.from_dict({1: 2.0})
    assert a == SparseVector([1], [2.0])
    assert hash(a) == hash(SparseVector([1], [2.0]))
    assert a != SparseVector.from_dict({1: 2.5})
    assert {a, SparseVector([1], [2.0])} == {a}


@pytest.mark.parametrize(
    ("indices", "values", "problem"),
    [
        ([3, 1], [1.0, 1.0], "sorted and unique"),
        ([1, 1], [1.0, 1.0], "sorted and unique"),
        ([-1], [1.0], r"\[0, 2\*\*31 - 1\]"),
        ([2**31], [1.0], r"\[0, 2\*\*31 - 1\]"),
        ([1.5], [1.0], "integers"),
        ([1, 2], [1.0], "2 sparse indices for 1 values"),
        ([1], [float("nan")], "finite"),
        ([[1]], [[1.0]], "1-D"),
    ],
)
def test_invalid_vectors_are_refused(indices: list, values: list, problem: str) -> None:
    with pytest.raises(InvalidInputError, match=problem):
        SparseVector(np.asarray(indices), np.asarray(values))
