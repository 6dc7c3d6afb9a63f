"""Text from data is shown with its control and bidi characters escaped, everything else as is."""

from __future__ import annotations

from poolrag.printable import printable


def test_controls_and_bidi_marks_are_shown_as_escapes_and_other_text_is_untouched() -> None:
    assert printable("\x1b]0;T\x07 tab\there\nend \u202eevil \x9b") == (
        "\\x1b]0;T\\x07 tab\\there\\nend \\u202eevil \\x9b"
    )
    assert printable("café 東京 — ok 🙂") == "café 東京 — ok 🙂"
    assert printable("name\udc80.txt") == "name\\udc80.txt"  # a file name's undecodable byte
