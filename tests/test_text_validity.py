"""Issue 27, items 3 and 7: one rule decides which texts a model can read, for every front door."""

from __future__ import annotations

import pytest

from poolrag.errors import InputTypeError, InvalidInputError
from poolrag.text_validity import check_text, has_visible_text, lone_surrogate, text_problem

INVISIBLE_ONLY = [
    "",
    "   \n\t",
    "\x00\x00",
    "\u200b",  # zero-width space
    "\u200b\u200c\u200d\ufeff\u2060",  # zero-width (non-)joiners, BOM, word joiner
    "\u202e\u202c",  # right-to-left override + pop: bidi controls
    "\u200e\u200f\u2066\u2069\u061c",  # marks and isolates
    "\u00ad \u180e",  # soft hyphen, Mongolian vowel separator
    "\U000e0041\U000e007f",  # tag characters (format, outside the fast path's list)
]


@pytest.mark.parametrize("text", INVISIBLE_ONLY)
def test_text_made_only_of_invisible_characters_is_empty(text: str) -> None:
    assert not has_visible_text(text)
    assert text_problem(text).startswith("is empty")
    with pytest.raises(InvalidInputError, match="input is empty"):
        check_text(text)


@pytest.mark.parametrize("text", ["a", "\u202eabc", "\u200b\u200bx", "\U000e0041é", "日本", "\x00 1"])
def test_one_visible_character_makes_text_readable(text: str) -> None:
    assert text_problem(text) is None
    assert check_text(text) is text


def test_a_lone_surrogate_is_invalid_and_located() -> None:
    text = "lone \ud800 surrogate escape"
    assert lone_surrogate(text) == 5
    assert lone_surrogate("fine é") is None
    assert text_problem(text) == "is not valid Unicode (lone surrogate at character 5)"
    with pytest.raises(InvalidInputError, match=r"documents\[2\] is not valid Unicode"):
        check_text(text, "documents[2]")
    assert text_problem("\udc00") is not None and text_problem("😀") is None  # a pair is fine


def test_a_non_string_is_a_type_error() -> None:
    with pytest.raises(InputTypeError, match="input must be a string, not int"):
        check_text(3)
