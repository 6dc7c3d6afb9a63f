"""The argparse type of a whole-number flag whose floor is not 1 (``positive_int``'s): each such
flag refuses other values in the same words."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def at_least(minimum: int, why: str = "") -> Callable[[str], int]:
    """An argparse type: a whole number of at least ``minimum``; ``why`` follows the floor in the
    refusal."""

    def whole_number(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            number = minimum - 1
        if number < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer of at least {minimum}{why}, got {value!r}")
        return number

    return whole_number
