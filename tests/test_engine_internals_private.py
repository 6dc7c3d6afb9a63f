"""No module outside ``engine.py``, ``core/`` and ``poolrag/testing/`` reaches into an Engine's wiring.

Every door (server, CLI, ingest, Ray, adapters, benchmarks) talks to the engine through its methods
and the protocols of ``poolrag.backend``; the wiring under it (``Pipeline``: processor, executor,
runner, batcher, core) can then change without touching them. Tests that probe one layer go through
``poolrag.testing.engine_internals``. Read with ``ast``, so a reach is caught wherever it stands.
"""

from __future__ import annotations

import ast
from pathlib import Path

from poolrag.engine import Engine
from poolrag.testing import engine_internals

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "poolrag"
#: where the wiring may be named: the engine that owns it, the layer that builds it, the test hook
ALLOWED = (PACKAGE / "engine.py", PACKAGE / "core", PACKAGE / "testing")
#: code shipped or run beside the library that must stay on the public surface too
SCANNED = (PACKAGE, ROOT / "benchmarks", ROOT / "integrations", ROOT / "scripts")
#: attributes that only exist under the engine (never a public name of anything a door holds)
PRIVATE_NAMES = frozenset({"_pipeline", "executor"})


def pipeline_fields() -> frozenset[str]:
    """The fields of ``core.model_setup.Pipeline``, read from its source so the check follows it."""
    tree = ast.parse((PACKAGE / "core" / "model_setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "Pipeline":
            return frozenset(
                stmt.target.id
                for stmt in node.body
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
            )
    raise AssertionError("core/model_setup.py defines no Pipeline class")


def reaches(code: str, fields: frozenset[str]) -> list[tuple[int, str]]:
    """``(line, spelling)`` of each reach into the wiring: ``x._pipeline``, ``x.executor`` and
    ``x.pipeline.<a Pipeline field>`` (a bare ``.pipeline`` may be another thing, e.g. an ingest run's)."""
    found = []
    for node in ast.walk(ast.parse(code)):
        if not isinstance(node, ast.Attribute):
            continue
        if node.attr in PRIVATE_NAMES:
            found.append((node.lineno, f".{node.attr}"))
        elif node.attr in fields and isinstance(node.value, ast.Attribute) and node.value.attr == "pipeline":
            found.append((node.lineno, f".pipeline.{node.attr}"))
    return sorted(found)


def scanned_files() -> list[Path]:
    files = []
    for base in SCANNED:
        for path in sorted(base.rglob("*.py")):
            if not any(path == allowed or allowed in path.parents for allowed in ALLOWED):
                files.append(path)
    return files


def test_no_module_outside_the_engine_and_core_reaches_into_its_wiring() -> None:
    fields = pipeline_fields()
    wrong = [
        f"{path.relative_to(ROOT)}:{line}: {spelling}"
        for path in scanned_files()
        for line, spelling in reaches(path.read_text(), fields)
    ]
    assert not wrong, (
        "Engine internals named outside engine.py / core/ (use the Engine's methods, the protocols "
        "in poolrag.backend, or poolrag.testing.engine_internals in tests):\n" + "\n".join(wrong)
    )


def test_the_scan_covers_the_doors() -> None:
    """The walk reads the server, ingest, Ray and CLI, so a reach there cannot hide."""
    scanned = {path.relative_to(PACKAGE).parts[0] for path in scanned_files() if PACKAGE in path.parents}
    assert {"server", "ingest", "scaleout", "cli", "frameworks", "llm.py"} <= scanned
    assert "engine.py" not in scanned and "core" not in scanned


def test_the_checker_sees_each_spelling_of_a_reach() -> None:
    fields = pipeline_fields()
    assert {"processor", "executor", "kind", "tokenizer"} <= fields
    code = (
        "def f(engine, run):\n"
        "    a = engine._pipeline\n"
        "    b = engine.pipeline.processor.frame_ids([1])\n"
        "    c = getattr(x, 'y').executor.batcher\n"
        "    d = run.pipeline.store  # an ingest run's pipeline: not the engine's\n"
        "    e = engine.max_batch_tokens\n"
    )
    assert reaches(code, fields) == [(2, "._pipeline"), (3, ".pipeline.processor"), (4, ".executor")]


def test_the_wiring_is_private_and_reached_in_tests_through_the_hook(tiny_model) -> None:
    assert not hasattr(Engine, "pipeline")
    engine = Engine(tiny_model("bert"))
    assert engine_internals.pipeline(engine) is engine._pipeline
    assert engine_internals.runner(engine).model is engine_internals.loaded_module(engine)
    assert engine_internals.batcher(engine).max_batch_tokens == engine.max_batch_tokens
    assert engine_internals.core(engine) is engine_internals.executor(engine).core
