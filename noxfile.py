"""Test sessions. `nox` runs them all; each gets its own virtualenv because some integration
packages cannot share one (llama-index's Milvus store breaks with the pymilvus 3 that
langchain-milvus needs)."""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "base_install", "first_hour", "tests", "llamaindex"]
nox.options.default_venv_backend = "venv"
nox.options.error_on_missing_interpreters = True

# torch==2.13.0 resolves to the local CPU wheel here; never let a dependency pull a CUDA build.
CPU_TORCH = ("-c", "constraints-cpu.txt")


@nox.session(python="3.11")
def lint(session: nox.Session) -> None:
    session.install("ruff==0.17.5")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python="3.11")
def base_install(session: nox.Session) -> None:
    """poolrag with no extras: every CLI subcommand and module either works or names its extra."""
    session.install(*CPU_TORCH, "-e", ".", "pytest>=8", "pytest-timeout>=2.3")
    session.run("pytest", "tests/first_hour/test_base_install.py", *session.posargs)


@nox.session(python="3.11")
@nox.parametrize(
    ("doc", "name"), [("README.md", "main"), ("docs/ingest.md", "qdrant")], ids=["readme", "qdrant"]
)
def first_hour(session: nox.Session, doc: str, name: str) -> None:
    """A documented command exactly as written, in this fresh virtualenv, offline, run twice."""
    session.run("python", "tests/first_hour/documented_commands.py", doc, name, "--top-hit", "sourdough.md")


@nox.session(python="3.11")
def tests(session: nox.Session) -> None:
    """Engine, server, ingestion, stores and the LangChain adapters."""
    session.install(
        *CPU_TORCH, "-e", ".[test,notebooks,server,milvus,qdrant,qdrant-edge,langchain,langchain-test]"
    )
    session.run("python", "scripts/build_test_assets.py")
    # test_base_install.py asserts what a user without extras sees: it runs in base_install
    ignored = ("--ignore=tests/integrations/llamaindex", "--ignore=tests/first_hour/test_base_install.py")
    session.run("pytest", "tests", *ignored, *session.posargs)


@nox.session(python="3.11")
def llamaindex(session: nox.Session) -> None:
    """The LlamaIndex adapters, in an environment of their own."""
    session.install(*CPU_TORCH, "-e", ".[test,server,qdrant,llamaindex,llamaindex-test]")
    session.run("python", "scripts/build_test_assets.py")
    session.run("pytest", "tests/integrations/llamaindex", *session.posargs)
