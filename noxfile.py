"""Test sessions. `nox` runs them all, each in a virtualenv of its own: the partner packages under
integrations/ install on their own next to poolrag. LlamaIndex's integrations are one distribution
per namespace; the `llamaindex` session installs the four into one environment with poolrag[milvus]
and runs each one's tests on their own. LlamaIndex's Milvus store pins pymilvus 2.6, so that session
also runs poolrag's Milvus store tests on 2.6; the `tests` session runs them on pymilvus 3."""

from __future__ import annotations

import os
import shutil

import nox

nox.options.sessions = [
    "lint",
    "base_install",
    "tests",
    "notebooks",
    "langchain",
    "llamaindex",
    "ray",  # late in scripts/nox_lanes.py's second lane: a local Ray cluster slows most beside tests
    "first_hour",  # after tests, whose test assets its documented commands use
]
nox.options.default_venv_backend = "venv"
nox.options.error_on_missing_interpreters = True

# poolrag's LlamaIndex distributions, one per LlamaIndex namespace (integrations/<name>)
LLAMA_INDEX_PACKAGES = (
    "llama-index-embeddings-poolrag",
    "llama-index-postprocessor-poolrag-rerank",
    "llama-index-retrievers-poolrag",
    "llama-index-sparse-embeddings-poolrag",
)
# torch==2.13.0 resolves to the local CPU wheel here; never let a dependency pull a CUDA build.
CPU_TORCH = ("-c", "constraints-cpu.txt")
# pip's --compile off: installed modules are byte-compiled when first imported, not all at install.
# That needs Python to keep what it compiles: with PYTHONDONTWRITEBYTECODE set (as on the machines
# this was measured on) every subprocess a test starts would compile torch again, so it is unset.
NO_COMPILE = {"PIP_COMPILE": "0"}
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
# The npm packages the JavaScript clients in tests/server/clients import, as their package-lock.json
# pins them; their test names this command when they are missing (tests/server/foreign_clients.py).
NPM_CLIENTS_INSTALL = ("npm", "ci", "--no-audit", "--no-fund", "--prefix", "tests/server/clients")


def install(session: nox.Session, *args: str) -> None:
    """Install under the CPU constraints with a current pip: the pip 23 that venv seeds backtracks
    into ResolutionImpossible (httpx[http2]) on the test extras, which pip 25 resolves. Without
    byte-compiling every installed module (pip's ``--compile`` off): on a 2-core EPYC that halved an
    install of the test extras (158 s to 76 s), and a run compiles only what it imports."""
    session.install("--upgrade", "pip>=25.3", env=NO_COMPILE)
    session.install(*CPU_TORCH, *args, env=NO_COMPILE)


@nox.session(python="3.11")
def lint(session: nox.Session) -> None:
    session.install("ruff==0.17.5")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python="3.11")
def base_install(session: nox.Session) -> None:
    """poolrag with no extras: every CLI subcommand and module either works or names its extra."""
    install(session, "-e", ".", "pytest>=8", "pytest-timeout>=2.3")
    session.run("pytest", "tests/first_hour/test_base_install.py", *session.posargs)


@nox.session(python="3.11")
@nox.parametrize(
    ("doc", "name", "top_hit"),
    [
        ("README.md", "main", "sourdough.md"),
        ("docs/ingest.md", "qdrant", "sourdough.md"),
        ("README.md", "server", ""),
    ],
    ids=["readme", "qdrant", "server"],
)
def first_hour(session: nox.Session, doc: str, name: str, top_hit: str) -> None:
    """Each documented install alone in a fresh virtualenv, then every doc block that runs under it.

    The install's command exactly as written, offline (a search twice, checking the top hit), then
    every block of README.md and docs/*.md that runs under that install, checked against what it says
    it prints (tests/first_hour/documented_commands.py). Hub models resolve to the test assets the
    tests session builds, so this session runs after it."""
    checks = ("--top-hit", top_hit) if top_hit else ()
    command = ("python", "tests/first_hour/documented_commands.py", doc, name, *checks, "--blocks")
    session.run(*command, env=NO_COMPILE)  # the same packages, less time (see install)


@nox.session(python="3.11")
def tests(session: nox.Session) -> None:
    """Engine, server, ingestion, stores, retrieval and CLI, a test file per worker on two workers:
    much of the suite waits on subprocesses that import torch and load a model, so on 2 cores two
    workers took 21 minutes where one took 36 (module fixtures stay one per file)."""
    install(session, "-e", ".[test,server,milvus,qdrant,qdrant-edge]")
    session.run("python", "scripts/build_test_assets.py")
    # seconds, from npm's cache after the first run; without npm, the test fails naming what to install
    if shutil.which("npm"):
        session.run(*NPM_CLIENTS_INSTALL, external=True)
    # test_base_install.py asserts what a user without extras sees: it runs in base_install
    session.run(
        "pytest",
        "tests",
        "--numprocesses=2",
        "--dist=loadfile",
        "--durations=25",  # where CI's minutes go
        "--ignore=tests/first_hour/test_base_install.py",
        "--ignore=tests/scaleout",  # the ray session's
        "--ignore=tests/notebooks",  # the notebooks session's
        *session.posargs,
    )


@nox.session(python="3.11")
def notebooks(session: nox.Session) -> None:
    """Every notebook executed top to bottom as a user installs them (the notebooks extra and both
    partner packages), offline on the packaged MiniLM: no test assets are built here, since a
    notebook that needed them would fail for its readers too. Two at a time: each runs in its own
    kernel and temporary folder, and asserts no timing."""
    install(
        session,
        "-e",
        ".[notebooks]",
        "-e",
        "integrations/langchain-poolrag[qdrant]",
        "-e",
        "integrations/llama-index-embeddings-poolrag",
        "-e",
        "integrations/llama-index-postprocessor-poolrag-rerank",
        "pytest>=8",
        "pytest-timeout>=2.3",
        "pytest-xdist>=3.6",
    )
    session.run("pytest", "tests/notebooks", "--numprocesses=2", *session.posargs)


@nox.session(python="3.11")
def ray(session: nox.Session) -> None:
    """Ingestion on Ray Data and replicas on Ray Serve, on a local 2-CPU Ray cluster."""
    install(session, "-e", ".[test,server,milvus,qdrant,ray]")
    session.run("python", "scripts/build_test_assets.py")
    session.run("pytest", "tests/scaleout", "--durations=15", *session.posargs)


def _partner_packages(session: nox.Session, *folders: str, poolrag: str = ".") -> None:
    """poolrag (``poolrag``: with the extras named there) plus partner packages with their test
    extras, nothing else, then each package's tests on their own (pytest given the package's folder
    reads that package's own settings)."""
    editables = [arg for folder in folders for arg in ("-e", f"integrations/{folder}[test]")]
    install(session, "-e", poolrag, *editables)
    session.run("python", "scripts/build_test_assets.py")  # the real models the tests run
    for folder in folders:
        session.run("pytest", f"integrations/{folder}", *session.posargs)


@nox.session(python="3.11")
def langchain(session: nox.Session) -> None:
    """langchain-poolrag: LangChain's standard suites, its unit and integration tests."""
    _partner_packages(session, "langchain-poolrag")


# poolrag's Milvus store tests (a server, Milvus Lite, and ingest and search through the CLI), run
# again on the pymilvus 2.6 that LlamaIndex's Milvus store pins; the tests session runs them on 3.x
MILVUS_STORE_TESTS = ("tests/stores", "-k", "milvus and not qdrant_edge")
# poolrag's hub-id resolution (a warm cache read with the hub unreachable, revisions, file listings)
HUB_TESTS = ("tests/config/test_resolve.py", "tests/config/test_hub_files.py")


@nox.session(python="3.11")
def llamaindex(session: nox.Session) -> None:
    """The four LlamaIndex distributions in one environment with poolrag[milvus], each one's tests
    (Qdrant, and LlamaIndex's Milvus store on Milvus Lite), then poolrag's own Milvus store tests on
    the pymilvus 2.6 that llama-index-vector-stores-milvus resolves to, and its hub-id resolution on
    huggingface-hub 2."""
    _partner_packages(session, *LLAMA_INDEX_PACKAGES, poolrag=".[milvus]")
    # the 2.6 runs below are the point: fail if the resolver ever picks another pymilvus here
    session.run("python", "-c", "import pymilvus as m; assert m.__version__[:4] == '2.6.', m.__version__")
    session.run("pytest", *MILVUS_STORE_TESTS, *session.posargs)
    # and poolrag's hub-id resolution on the huggingface-hub 2 (httpx2 under it) that a user's install
    # resolves to: the tests session's test extra pins hub 1 through langchain-huggingface
    session.run("python", "-c", "import huggingface_hub as h; assert h.__version__[0] == '2', h.__version__")
    session.run("pytest", *HUB_TESTS, *session.posargs)
