"""Does what a block printed match what its page says it prints?

Docs abbreviate: ``…`` (or ``...``) stands for whatever is there (``"embd-…"``, ``[0.1302, -0.0157,
…]``, ``{"index": 1, "document": …}``), numbers are rounded, and a JSON answer may show only some of
its keys. So a documented value matches when every key it shows is there with a matching value,
every list item it shows before a ``…`` is there in order, and every number is within one unit of
its last written digit. ``created`` is a clock reading and is not compared.

Standard library only, like the rest of the ``first_hour`` runner.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

ELLIPSIS = "<…>"  # what an unquoted … becomes while the documented JSON is parsed
VOLATILE_KEYS = frozenset({"created"})
_NUMBER = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
_WILDCARD = re.compile(r"…|\.\.\.")


def json_documents(text: str) -> list[Any]:
    """The JSON objects in ``text`` in order (answers between access-log lines or markers)."""
    decoder, documents, at = json.JSONDecoder(), [], text.find("{")
    while at != -1:
        try:
            document, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            end = at + 1
        else:
            documents.append(document)
        at = text.find("{", end)
    return documents


def parse_documented(text: str) -> tuple[str | None, Any]:
    """(an HTTP status line it shows, or None; the documented JSON with ``…`` as :data:`ELLIPSIS`)."""
    lines = text.strip().splitlines()
    status = lines.pop(0).strip() if lines and lines[0].startswith("HTTP/") else None
    body = _without_trailing_comments("\n".join(lines)).strip()
    if body.startswith('"'):  # a fragment of an object: "results": [...]
        body = "{" + body + "}"
    body = _unquoted_ellipses(body)
    body = re.sub(rf',\s*"{ELLIPSIS}"\s*}}', "}", body)  # {"a": 1, …}: more keys, which any object may have
    return status, json.loads(body, parse_float=Decimal) if body else None


def mismatches(documented: str, output: str) -> list[str]:
    """Why ``output`` (a command's stdout) is not what ``documented`` shows; empty when it is."""
    status, expected = parse_documented(documented)
    problems = []
    if status is not None:
        wanted = " ".join(status.split()[:2])  # HTTP/1.1 404
        if not any(line.startswith(wanted) for line in output.splitlines()):
            problems.append(f"no {wanted!r} status line")
    if expected is None:
        return problems
    answers = json_documents(output)
    if not answers:
        return [*problems, "it printed no JSON"]
    differences = [_differences(expected, answer, "") for answer in answers]
    best = min(differences, key=len)
    return problems + best


def line_mismatches(documented_lines: list[str], printed: str) -> list[str]:
    """Each documented line must match a printed line, in order (``…`` wildcards, numbers to their
    written precision)."""
    lines = [line.rstrip() for line in printed.splitlines()]
    problems, at = [], 0
    for wanted in documented_lines:
        found = next((i for i in range(at, len(lines)) if line_matches(wanted, lines[i])), None)
        if found is None:
            problems.append(f"documented {wanted!r} is not among the printed lines")
        else:
            at = found + 1
    return problems


def line_matches(documented: str, printed: str) -> bool:
    """``printed`` is the ``documented`` line, numbers within one unit of their last written digit."""
    pattern, numbers = [], []
    for piece in re.split(rf"({_NUMBER}|…|\.\.\.)", documented.strip()):
        if not piece:
            continue
        if _WILDCARD.fullmatch(piece):
            pattern.append(".*?")
        elif re.fullmatch(_NUMBER, piece):
            pattern.append(f"({_NUMBER})")
            numbers.append(piece)
        else:
            pattern.append(re.escape(piece))
    match = re.fullmatch("".join(pattern), printed.strip())
    return match is not None and all(
        _number_matches(Decimal(want), got) for want, got in zip(numbers, match.groups(), strict=True)
    )


def _number_matches(want: Decimal, got: object) -> bool:
    if isinstance(got, bool) or not isinstance(got, int | float | str | Decimal):
        return False
    try:
        value = Decimal(str(got))
    except ArithmeticError:
        return False
    exponent = want.as_tuple().exponent
    if not isinstance(exponent, int) or exponent >= 0:
        return value == want  # an integer is exact
    return abs(value - want) <= Decimal(1).scaleb(exponent)


def _differences(expected: Any, actual: Any, path: str) -> list[str]:
    if expected == ELLIPSIS:
        return []
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path or 'the answer'} is {type(actual).__name__}, documented as an object"]
        found = []
        for key, value in expected.items():
            if key == ELLIPSIS or key in VOLATILE_KEYS:
                continue
            if key not in actual:
                found.append(f"{path}.{key} is missing" if path else f"{key!r} is missing")
            else:
                found += _differences(value, actual[key], f"{path}.{key}" if path else key)
        return found
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return [f"{path} is {actual!r:.80}, documented as a list"]
        shown = expected[: expected.index(ELLIPSIS)] if ELLIPSIS in expected else expected
        if len(actual) < len(shown) or (ELLIPSIS not in expected and len(actual) != len(expected)):
            return [f"{path} has {len(actual)} items, documented {len(expected)}"]
        return [d for i, item in enumerate(shown) for d in _differences(item, actual[i], f"{path}[{i}]")]
    if isinstance(expected, str):
        if "…" in expected or "..." in expected:
            pattern = ".*".join(re.escape(p) for p in _WILDCARD.split(expected))
            ok = isinstance(actual, str) and re.fullmatch(pattern, actual, re.S) is not None
        else:
            ok = expected == actual
        return [] if ok else [f"{path} is {actual!r:.80}, documented {expected!r}"]
    if isinstance(expected, bool) or expected is None:
        return [] if expected is actual else [f"{path} is {actual!r}, documented {expected!r}"]
    if isinstance(expected, int | Decimal):
        return (
            []
            if _number_matches(Decimal(expected), actual)
            else [f"{path} is {actual!r}, documented {expected}"]
        )
    return [f"{path}: cannot compare the documented {expected!r}"]


def _without_trailing_comments(text: str) -> str:
    """Documented JSON with ``# why`` notes after a line's JSON taken out (outside strings)."""
    out = []
    for line in text.splitlines():
        quote, cut = False, len(line)
        for at, char in enumerate(line):
            if char == '"' and (at == 0 or line[at - 1] != "\\"):
                quote = not quote
            elif char == "#" and not quote:
                cut = at
                break
        out.append(line[:cut].rstrip())
    return "\n".join(out)


def _unquoted_ellipses(text: str) -> str:
    out, quote = [], False
    at = 0
    while at < len(text):
        char = text[at]
        if char == '"' and (at == 0 or text[at - 1] != "\\"):
            quote = not quote
        if not quote and (char == "…" or text.startswith("...", at)):
            out.append(f'"{ELLIPSIS}"')
            at += 1 if char == "…" else 3
            continue
        out.append(char)
        at += 1
    return "".join(out)
