"""Text from data (a stored record, a document, a file name) made safe to show on a terminal.

Whoever wrote the data chose its characters: an ESC sequence printed raw retitles or clears the
reader's terminal, and a bidi control reorders what they read. Those characters are shown as
their Python escapes instead.
"""

from __future__ import annotations

import re

#: C0/C1 controls (ESC, BEL, newlines) and bidi controls: never shown raw
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def printable(text: str) -> str:
    """``text`` with every control and bidi character written as its escape (``\\x1b``)."""
    return _UNPRINTABLE.sub(_escaped, text)
