"""The public API as a type checker sees it: typed code that runs is accepted, code that fails is
refused, and every exported name exists for the checker (the facades resolve theirs lazily)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: packages whose ``__init__`` resolves exported names on first use
LAZY_FACADES = [
    "src/poolrag/__init__.py",
    "src/poolrag/client/__init__.py",
    "src/poolrag/server/__init__.py",
    "integrations/langchain-poolrag/langchain_poolrag/__init__.py",
    "integrations/llama-index-sparse-embeddings-poolrag/llama_index/sparse_embeddings/poolrag/__init__.py",
]


#: packages that poolrag's public signatures never name, which mypy would otherwise analyse because
#: something imported imports them: skipped (their names read as Any), they were over half the run
#: (transformers alone is 2,500 modules). torch, numpy and the server's stack stay: their types are
#: in the checked calls.
NOT_ANALYSED = ("transformers", "IPython", "matplotlib", "prompt_toolkit", "onnx", "opentelemetry", "rich")


def test_typed_usage_passes_mypy_strict(tmp_path: Path) -> None:
    """tests/typed_usage.py: documented calls (images, token prompts, vLLM's types, the backends a
    server or pipeline takes) are accepted, and each wrong call marked there is refused (under
    --strict an ignore that no longer silences an error is itself an error)."""
    config = tmp_path / "mypy.ini"
    skipped = ",".join(f"{name}.*" for name in NOT_ANALYSED)
    config.write_text(f"[mypy]\n[mypy-{skipped}]\nfollow_imports = skip\n", encoding="utf-8")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            f"--config-file={config}",
            "--strict",
            "--follow-imports=silent",  # poolrag's own internals are not what this checks
            f"--cache-dir={tmp_path / 'cache'}",
            str(ROOT / "tests" / "typed_usage.py"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def names_a_checker_sees(tree: ast.Module) -> set[str]:
    """Names bound at module level, under ``if TYPE_CHECKING:`` included; a ``__getattr__`` hidden
    from checkers (``if not TYPE_CHECKING:``) binds none."""
    seen: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            seen |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            seen.add(node.name)
        elif isinstance(node, ast.Assign):
            seen |= {target.id for target in node.targets if isinstance(target, ast.Name)}
    return seen


def exported(tree: ast.Module) -> list[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return list(ast.literal_eval(node.value))
    return []


def module_getattr_is_visible(tree: ast.Module) -> bool:
    return any(isinstance(node, ast.FunctionDef) and node.name == "__getattr__" for node in tree.body)


@pytest.mark.parametrize("facade", LAZY_FACADES)
def test_every_exported_name_is_known_to_a_type_checker(facade: str) -> None:
    tree = ast.parse((ROOT / facade).read_text(encoding="utf-8"))
    assert exported(tree), f"{facade} has no __all__"
    unseen = sorted(set(exported(tree)) - names_a_checker_sees(tree))
    assert not unseen, f"{facade}: exported but not imported under TYPE_CHECKING: {unseen}"
    # a module-level __getattr__ would answer every misspelt name with its return type
    assert not module_getattr_is_visible(tree), f"{facade}: put __getattr__ under `if not TYPE_CHECKING:`"
