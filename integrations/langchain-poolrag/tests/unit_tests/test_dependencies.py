"""The package's requirements: a LangChain environment of any 1.x release can install it."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement

PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"


def _requirement(name: str) -> Requirement:
    dependencies = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["dependencies"]
    return next(r for r in map(Requirement, dependencies) if r.name == name)


def test_langchain_core_is_capped_at_the_next_major_only() -> None:
    # LangChain's own packages raise their langchain-core floor within 1.x (langchain 1.5 needs
    # >= 1.8), so a cap on a minor release makes pip refuse, or downgrade, a current LangChain.
    specifier = _requirement("langchain-core").specifier
    assert specifier.contains("1.0.0")
    assert all(specifier.contains(f"1.{minor}.0") for minor in range(8, 100))
    assert not specifier.contains("2.0.0")
