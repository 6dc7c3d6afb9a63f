"""The namespace check the LlamaIndex distributions' tests run finds each way a leaf distribution can
break its shared namespaces or hide a class."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from poolrag.testing.namespace_distribution import namespace_problems

LEAF = """
class Base: ...
class Good(Base): ...
class Stray: ...
__all__ = ["Good", "Stray"]
"""


@pytest.fixture
def distribution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder laid out like a LlamaIndex integration: shared/kind/leaf/__init__.py only."""
    leaf = tmp_path / "shared_ns_probe" / "kind" / "leaf"
    leaf.mkdir(parents=True)
    (leaf / "__init__.py").write_text(LEAF)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("shared_ns_probe")]:
        del sys.modules[name]


MODULE = "shared_ns_probe.kind.leaf"


def test_a_clean_leaf_has_no_problems(distribution: Path) -> None:
    assert namespace_problems(distribution, MODULE, {"Good": "Base"}) == []


def test_an_init_in_a_shared_folder_is_reported(distribution: Path) -> None:
    (distribution / "shared_ns_probe" / "kind" / "__init__.py").write_text("")
    assert namespace_problems(distribution, MODULE, {"Good": "Base"}) == [
        "shared_ns_probe/kind/__init__.py claims a shared namespace"
    ]


def test_a_class_not_exported_or_on_the_wrong_base_is_reported(distribution: Path) -> None:
    assert namespace_problems(distribution, MODULE, {"Missing": "Base", "Stray": "Base"}) == [
        f"{MODULE}.__all__ lacks Missing",
        f"{MODULE}.Stray does not derive from Base",
    ]
