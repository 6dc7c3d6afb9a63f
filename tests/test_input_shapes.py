"""One prompt or many, and score pairs: the shapes both the engine and the HTTP client accept."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from poolrag.errors import InputTypeError, InvalidInputError
from poolrag.input_shapes import prompt_list, score_pairs


def test_one_prompt_is_a_list_of_one_and_a_list_holds_only_prompts() -> None:
    assert prompt_list("a cat") == ["a cat"]
    assert prompt_list({"prompt_token_ids": [101, 102]}) == [{"prompt_token_ids": [101, 102]}]
    assert prompt_list(("a", "b")) == ["a", "b"]
    with pytest.raises(InputTypeError, match="input must be a string or a list of strings, not int"):
        prompt_list(3)
    with pytest.raises(InputTypeError, match=r"^input\[1\] must be a text, a token prompt or an image \("):
        prompt_list(["a", 1])


def test_a_column_of_texts_is_a_list_of_python_strings() -> None:
    """A Ray Data or pandas batch's column, as sentence-transformers' ``encode`` takes a numpy array."""
    columns = [
        np.array(["a", "b"]),
        np.array(["a", "b"], dtype=object),
        pd.Series(["a", "b"]),
        pa.array(["a", "b"]),
        pa.chunked_array([["a"], ["b"]]),
    ]
    for column in columns:
        items = prompt_list(column)
        assert items == ["a", "b"] and all(type(item) is str for item in items)
    assert prompt_list(np.array([], dtype=object)) == []
    with pytest.raises(InputTypeError, match=r"^input\[1\] must be .*, not None \(a missing value\)$"):
        prompt_list(pa.array(["a", None]))
    with pytest.raises(InputTypeError, match=r"^input\[2\] must be .*, not nan \(a missing value\)$"):
        prompt_list(pd.Series(["a", "b", float("nan")]))
    with pytest.raises(InputTypeError, match="input must be a string or a list of strings, not ndarray"):
        prompt_list(np.array([["a", "b"]]))


def test_pairs_are_one_to_many_or_many_to_many() -> None:
    assert score_pairs("q", ["a", "b"]) == (["q"], ["a", "b"])
    assert score_pairs(["q1", "q2"], ["a", "b"]) == (["q1", "q2"], ["a", "b"])
    assert score_pairs([], []) == ([], [])
    with pytest.raises(InvalidInputError, match=r"^text_2 is empty: .* must both be non-empty") as empty:
        score_pairs("q", [])
    assert empty.value.param == "text_2"  # the side at fault, as a route names it (documents)
    with pytest.raises(InvalidInputError, match=r"^text_1 is empty") as empty:
        score_pairs([], ["a"])
    assert empty.value.param == "text_1"
    with pytest.raises(InvalidInputError, match="text_1 has 2 items and text_2 3"):
        score_pairs(["q1", "q2"], ["a", "b", "c"])
    # the shape only: whether a text can be read is the engine's input stage's one check
    assert score_pairs("q", ["a", "   "]) == (["q"], ["a", "   "])
    with pytest.raises(InputTypeError, match=r"^text_2\[1\] must be a text or an image \(.*\), not dict$"):
        score_pairs("q", ["a", {"prompt_token_ids": [101]}])
