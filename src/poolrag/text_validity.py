"""Which texts a model can read: the one rule the engine, the server, ingest and the adapters apply.

A text is *invalid* when it holds a lone surrogate: JSON's ``"\\ud800"`` escape makes one, and no
tokenizer can encode it (it is not Unicode). A text is *empty* when nothing is left once
whitespace, control characters (NUL...) and invisible format characters (zero-width spaces and
joiners, bidi controls, BOM, soft hyphen, word joiner) are set aside: every tokenizer reads such a
text as nothing but its special tokens, so bidi-only text is refused exactly like zero-width-only
text and ``""``. Everything else is read as it is. A door that cannot answer per text (a request)
refuses the whole request; one that can (ingest) skips that record, names it in one line and goes on.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from poolrag.errors import InputTypeError, InvalidTextError

#: Categories that show nothing: controls, format characters (zero-width, bidi), separators.
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})
#: Candidates for a visible character: everything but whitespace, C0/C1 controls and the common
#: invisible format characters. Rarer format characters (Arabic number signs, tags...) match here
#: and are set aside by their category, so the usual text is judged at its first character.
_MAYBE_VISIBLE = re.compile(
    "[^\\s\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff]"
)
_SURROGATE = re.compile("[\ud800-\udfff]")


def has_visible_text(text: str) -> bool:
    """Whether ``text`` holds a character that is not whitespace, a control or a format character."""
    return any(
        unicodedata.category(m.group()) not in _INVISIBLE_CATEGORIES for m in _MAYBE_VISIBLE.finditer(text)
    )


def lone_surrogate(text: str) -> int | None:
    """Where ``text`` holds its first lone surrogate, or ``None`` (searched, never encoded: a 16 MB
    text is not copied to find out)."""
    if text.isascii():
        return None
    found = _SURROGATE.search(text)
    return None if found is None else found.start()


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be embedded (``"is not valid Unicode ..."`` or ``"is empty ..."``, to
    follow the text's name), or ``None`` when it can."""
    position = lone_surrogate(text)
    if position is not None:
        return f"is not valid Unicode (lone surrogate at character {position})"
    if not has_visible_text(text):
        return "is empty (only whitespace, control or invisible format characters)" if text else "is empty"
    return None


def check_texts(values: Sequence[object], what: str) -> list[str]:
    """:func:`check_text` of each, named by its position (``documents[3] is empty``)."""
    return [check_text(value, what, index=i) for i, value in enumerate(values)]


def check_text(value: object, what: str = "input", index: int | None = None) -> str:
    """``value`` if it is a string a model can read, named ``what`` (``what[index]`` in a list).

    The engine applies it once per input, in its input stage
    (:mod:`poolrag.tokenization.input_processor`); doors that answer before any engine does (the
    HTTP client, the cache, ingest) apply it themselves.

    Raises:
        InputTypeError: ``value`` is not a string.
        InvalidTextError: the text is invalid or empty by the rule above.
    """
    if not isinstance(value, str):
        where = what if index is None else f"{what}[{index}]"
        raise InputTypeError(f"{where} must be a string, not {type(value).__name__}", param=what)
    problem = text_problem(value)
    if problem is not None:
        raise InvalidTextError(what, index, problem)
    return value
