"""No module of poolrag imports a layer above its own (the order is written in poolrag's docstring).

The graph is read with ``ast``, not by importing: every ``import`` and ``from ... import`` counts,
wherever it stands (module level, inside a function, under ``if TYPE_CHECKING:``), and so does
``importlib.import_module("poolrag...")`` with a literal name.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "poolrag"
FACADE = "poolrag"  # the package's own __init__, a layer of its own


def written_layers() -> list[list[str]]:
    """The layers of the package docstring's literal block, bottom first: ``name, name: why``."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    doc = ast.get_docstring(tree) or ""
    _, _, block = doc.partition("::\n")
    layers = []
    for line in block.splitlines():
        if not line.strip():
            if layers:
                break
            continue
        names, colon, _why = line.strip().partition(":")
        assert colon, f"layer line without 'names: why': {line!r}"
        layers.append([name.strip() for name in names.split(",")])
    return layers


def layer_rank() -> dict[str, int]:
    rank: dict[str, int] = {}
    for index, names in enumerate(written_layers()):
        for name in names:
            assert name not in rank, f"{name} is written twice in the layer order"
            rank[name] = index
    return rank


def units() -> set[str]:
    """Every top-level module and subpackage of poolrag (folders without Python code are data)."""
    found = {FACADE}
    for path in PACKAGE.iterdir():
        if path.suffix == ".py" and path.name != "__init__.py":
            found.add(path.stem)
        elif path.is_dir() and any(path.rglob("*.py")):
            found.add(path.name)
    return found


def facade_exports() -> dict[str, str]:
    """The facade's lazy names (``_EXPORTS``): ``from poolrag import Engine`` means poolrag.engine."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "_EXPORTS" for t in node.targets
        ):
            return ast.literal_eval(node.value)
    return {}


@dataclass(frozen=True)
class Arrow:
    source: str  # the importing unit
    target: str  # the imported unit
    where: str  # file:line


def unit_of(module: str, known: set[str]) -> str | None:
    parts = module.split(".")
    if parts[0] != "poolrag":
        return None
    if len(parts) == 1:
        return FACADE
    return parts[1] if parts[1] in known else FACADE


def module_parts(path: Path) -> list[str]:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def imported_modules(code: str, package: list[str], known: set[str]) -> list[tuple[str, int]]:
    """Each poolrag module ``code`` imports, with its line; ``package`` is where ``code`` lives."""
    exports = facade_exports()
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(code)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module == "poolrag":  # from poolrag import engine / Engine / __version__
                for alias in node.names:
                    if alias.name in known:
                        targets.append(f"poolrag.{alias.name}")
                    else:
                        targets.append(exports.get(alias.name, "poolrag"))
            else:
                targets = [module]
        elif isinstance(node, ast.Call) and _is_import_module(node):
            targets = [node.args[0].value]
        found.extend((module, node.lineno) for module in targets if module.split(".")[0] == "poolrag")
    return found


def _is_import_module(node: ast.Call) -> bool:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return (
        name == "import_module"
        and bool(node.args)
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    )


def arrows() -> list[Arrow]:
    known = units()
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = module_parts(path)
        source = parts[1] if len(parts) > 1 else FACADE
        package = parts if path.name == "__init__.py" else parts[:-1]
        where = path.relative_to(PACKAGE.parents[1])
        for module, line in imported_modules(path.read_text(), package, known):
            target = unit_of(module, known)
            if target is not None and target != source:
                found.append(Arrow(source, target, f"{where}:{line}"))
    return found


def test_every_module_is_placed_in_the_layer_order() -> None:
    missing = sorted(units() - set(layer_rank()))
    assert not missing, (
        f"not in the layer order of src/poolrag/__init__.py's docstring: {missing}; "
        "write each on the line of the layer it belongs to"
    )


def test_the_layer_order_names_only_modules_that_exist() -> None:
    stale = sorted(set(layer_rank()) - units())
    assert not stale, f"the layer order names modules that do not exist: {stale}"


def violations(found: list[Arrow], rank: dict[str, int]) -> list[str]:
    """``file:line: source imports target (why)`` for each arrow up or sideways."""
    return [
        f"{arrow.where}: {arrow.source} imports {arrow.target}"
        + (" (a peer on the same layer)" if rank[arrow.target] == rank[arrow.source] else " (a higher layer)")
        for arrow in found
        if arrow.source in rank and arrow.target in rank and rank[arrow.target] >= rank[arrow.source]
    ]


def test_no_module_imports_a_higher_layer_or_a_peer() -> None:
    wrong = violations(arrows(), layer_rank())
    assert not wrong, "imports against the layer order:\n" + "\n".join(wrong)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("from poolrag.engine import Engine", "poolrag.engine"),
        ("from poolrag import Engine", "poolrag.engine"),
        ("from poolrag import core", "poolrag.core"),
        ("import poolrag.server.app", "poolrag.server.app"),
        ("from ..core import engine_core", "poolrag.core"),
        ("from . import heads", "poolrag.pooling"),
        ("from poolrag import __version__", "poolrag"),
        ("importlib.import_module('poolrag.cli')", "poolrag.cli"),
    ],
)
def test_the_walk_sees_every_spelling_of_an_import(line: str, expected: str) -> None:
    """The checker itself: each spelling, even lazy inside a function or for typing, names its target."""
    code = f"if TYPE_CHECKING:\n    import os\ndef late():\n    if True:\n        {line}\n"
    # as if written in poolrag/pooling/some_module.py
    assert imported_modules(code, ["poolrag", "pooling"], units()) == [(expected, 5)]


def test_an_arrow_up_or_sideways_is_reported_with_its_file_and_line() -> None:
    rank = layer_rank()
    found = [
        Arrow("models", "loading", "src/poolrag/models/x.py:7"),
        Arrow("pooling", "scoring", "src/poolrag/pooling/y.py:3"),
        Arrow("engine", "core", "src/poolrag/engine.py:9"),  # downward: fine
    ]
    assert violations(found, rank) == [
        "src/poolrag/models/x.py:7: models imports loading (a higher layer)",
        "src/poolrag/pooling/y.py:3: pooling imports scoring (a peer on the same layer)",
    ]
    assert unit_of("poolrag.cli.serve", units()) == "cli"
    assert unit_of("numpy", units()) is None


def test_the_compile_layer_sits_between_runner_and_engine_and_loads_on_demand() -> None:
    """The background compile drives the runner and is started by the engine; torch's compiler
    stack costs seconds to import, so no module imports it at load time (cold start stays eager's)."""
    rank = layer_rank()
    assert rank["runner"] < rank["compile"] < rank["core"] < rank["engine"]
    for path in sorted(PACKAGE.rglob("*.py")):
        if module_parts(path)[1:2] == ["compile"]:
            continue
        for node in ast.parse(path.read_text()).body:  # module level only; TYPE_CHECKING blocks are ifs
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("poolrag.compile"):
                raise AssertionError(
                    f"{path.relative_to(PACKAGE.parents[1])}:{node.lineno} imports the compiler eagerly"
                )


def test_the_test_helpers_are_the_top_layer_and_no_library_module_imports_them() -> None:
    """poolrag.testing may use every layer (engines, servers, the CLI); the library never uses it, so
    the helpers and their test-only imports stay out of what users run."""
    rank = layer_rank()
    assert rank["testing"] == max(rank.values())
    assert [name for name, r in rank.items() if r == rank["testing"]] == ["testing"]
    into_testing = [arrow.where for arrow in arrows() if arrow.target == "testing"]
    assert not into_testing, f"library modules import poolrag.testing: {into_testing}"
