"""benchmarks/RESULTS.md is today's figures, found by script: one section per benchmark, in order."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
MAX_LINES = 700  # a page a reader scans for one figure, not a diary (git keeps the history)


def _sections(text: str) -> list[str]:
    return re.findall(r"^## (\S+\.py)$", text, flags=re.MULTILINE)


def _helpers(text: str) -> set[str]:
    intro = text.split("\n## ", 1)[0]
    helpers_sentence = intro[intro.index("`common.py`") :].split("helpers", 1)[0]
    return set(re.findall(r"`(\w+\.py)`", helpers_sentence))


def test_every_benchmark_script_has_one_section_in_alphabetical_order() -> None:
    text = RESULTS.read_text(encoding="utf-8")
    scripts = {path.name for path in (ROOT / "benchmarks").glob("*.py")}
    sections = _sections(text)
    assert sections == sorted(sections) and len(sections) == len(set(sections))
    assert set(sections) == scripts - _helpers(text)


def test_each_section_says_when_its_figures_were_measured() -> None:
    text = RESULTS.read_text(encoding="utf-8")
    for section in re.split(r"^## ", text, flags=re.MULTILINE)[1:]:
        name = section.split("\n", 1)[0]
        assert re.search(r"\b20\d\d-\d\d-\d\d\b", section), f"{name} names no date"


def test_the_page_stays_short_enough_to_scan() -> None:
    assert len(RESULTS.read_text(encoding="utf-8").splitlines()) <= MAX_LINES
