"""The classes as a user's type checker sees them: the documented swaps for LangChain's HuggingFace
classes are accepted, wrong calls refused (see typed_usage.py)."""

from __future__ import annotations

from pathlib import Path

from poolrag.testing.type_checks import mypy_strict

PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def test_typed_usage_passes_mypy_strict() -> None:
    run = mypy_strict(Path(__file__).with_name("typed_usage.py"), PACKAGE_ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
