"""Text from data (a stored record, a document, a file name) made safe to show on a terminal.

Whoever wrote the data chose its characters: an ESC sequence printed raw retitles or clears the
reader's terminal, and a bidi control reorders what they read. Those characters are shown as
their Python escapes instead, as is a lone surrogate (a file name's undecodable byte), which no
terminal can be sent.
"""

from __future__ import annotations

import re

#: C0/C1 controls (ESC, BEL, newlines), bidi controls and lone surrogates: never shown raw
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escaped(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def printable(text: str) -> str:
    """``text`` with every control and bidi character and lone surrogate written as its escape
    (``\\x1b``, ``\\udc80``)."""
    return _UNPRINTABLE.sub(_escaped, text)
