"""poolrag's wheel and each partner package's carry every file their code reads, and the license text.

Tests and nox sessions install the checkouts editable, where any file in a package's folder is there
to read; a user installs the wheel, built from the sdist as ``python -m build`` builds it, which holds
only what the package configuration names (a Jinja score template left out of package-data breaks
only there). Each project is built that way here from a copy of its folder without git or build
leftovers, with this environment's setuptools, and its wheel is compared with the package folders; the sdist
carries no test files (they run from the repository only).
"""

from __future__ import annotations

import email
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: project folder -> the package folder in it, as (the folder packages are found in, package)
PROJECTS = {
    ".": ("src", "poolrag"),
    "integrations/langchain-poolrag": ("", "langchain_poolrag"),
    "integrations/llama-index-embeddings-poolrag": ("", "llama_index/embeddings/poolrag"),
    "integrations/llama-index-postprocessor-poolrag-rerank": ("", "llama_index/postprocessor/poolrag_rerank"),
    "integrations/llama-index-retrievers-poolrag": ("", "llama_index/retrievers/poolrag"),
    "integrations/llama-index-sparse-embeddings-poolrag": ("", "llama_index/sparse_embeddings/poolrag"),
}
#: (the folder packages are found in, within a copy of the checkout; the package; the wheel; the sdist's
#: file names below its top folder)
Built = tuple[Path, str, zipfile.ZipFile, list[str]]
_BUILD = "import sys\nfrom setuptools import build_meta\nprint(getattr(build_meta, sys.argv[1])(sys.argv[2]))"


def _untracked() -> Callable[[str, list[str]], set[str]]:
    """What git leaves out of a checkout (.gitignore's names) and .git itself: a fresh clone's files."""
    lines = (ROOT / ".gitignore").read_text().splitlines()
    return shutil.ignore_patterns(".git", *(s.strip("/") for s in lines if s.strip() and s[0] != "#"))


def _build(source: Path, hook: str, out: Path) -> Path:
    """Run setuptools' PEP 517 ``hook`` in ``source`` (its own process: the hooks read the cwd)."""
    out.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", _BUILD, hook, str(out)], cwd=source, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out / done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module", params=sorted(PROJECTS), ids=lambda p: Path(p).name or "poolrag")
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Built:
    """Where the project's package is found in a fresh copy of its checkout, the package, and the
    wheel built from the project's sdist, as a user's ``pip install`` of either gets it."""
    project = request.param
    tmp_path = tmp_path_factory.mktemp("build")
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / project, checkout, ignore=_untracked())
    sdist = _build(checkout, "build_sdist", tmp_path / "sdist")
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path / "unpacked", filter="data")
        sdist_names = [m.name.partition("/")[2] for m in archive.getmembers() if m.isfile()]
    (unpacked,) = (tmp_path / "unpacked").iterdir()
    wheel = zipfile.ZipFile(_build(unpacked, "build_wheel", tmp_path / "wheel"))
    request.addfinalizer(wheel.close)
    where, package = PROJECTS[project]
    return checkout / where, package, wheel, sdist_names


def test_wheel_holds_every_file_of_its_package(built: Built) -> None:
    found_in, package, wheel, _ = built
    wanted = {
        path.relative_to(found_in).as_posix()
        for path in (found_in / package).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    names = set(wheel.namelist())
    assert sorted(wanted - names) == []
    assert not [name for name in names if name.startswith(("tests/", "test/"))]


def test_wheel_carries_the_license_text(built: Built) -> None:
    wheel = built[2]
    (metadata,) = [name for name in wheel.namelist() if name.endswith(".dist-info/METADATA")]
    fields = email.message_from_bytes(wheel.read(metadata))
    assert fields["License-Expression"] == "Apache-2.0"
    assert fields.get_all("License-File") == ["LICENSE"]
    text = wheel.read(metadata.replace("METADATA", "licenses/LICENSE")).decode()
    assert "Apache License" in text and "Version 2.0, January 2004" in text


def test_sdist_ships_no_test_files(built: Built) -> None:
    """setuptools adds a project's tests/test*.py to its sdist by default, but not the conftest.py,
    helpers and test assets they need, so a packager running them from the sdist got fixture errors;
    the tests live in the repository only."""
    sdist_names = built[3]
    assert "pyproject.toml" in sdist_names
    assert [name for name in sdist_names if name.startswith(("tests/", "test/"))] == []
