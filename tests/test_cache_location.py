"""poolrag_cache_dir: where the embedding cache, checkpoints and compiled graphs go."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from poolrag.cache import default_cache_path
from poolrag.cache_location import poolrag_cache_dir


def test_the_env_folder_wins_and_a_quoted_tilde_is_the_home_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``POOLRAG_CACHE_DIR="~/pr"`` from an env file or a Dockerfile reaches poolrag unexpanded; it
    made a folder named ``~`` in whatever directory a run started in."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("POOLRAG_CACHE_DIR", "~/pr")
    assert poolrag_cache_dir() == tmp_path / "pr"
    assert default_cache_path() == tmp_path / "pr" / "embeddings.sqlite"


def test_without_the_env_folder_it_is_under_the_xdg_cache_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("POOLRAG_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert poolrag_cache_dir() == tmp_path / "xdg" / "poolrag"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert poolrag_cache_dir() == tmp_path / ".cache" / "poolrag"


def test_a_user_with_no_home_gets_a_folder_in_the_temp_folder_not_a_crash(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ``$HOME`` and a uid with no passwd entry (``docker run --user 12345`` under ``env -i``, a
    systemd unit): every ``poolrag`` command, ``--help`` included, died with Python's
    ``RuntimeError: Could not determine home directory`` while building its parser."""
    import pwd
    import tempfile

    from poolrag.cli import main

    for name in ("HOME", "POOLRAG_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)

    def no_entry(uid: int) -> pwd.struct_passwd:
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    folder = poolrag_cache_dir()
    assert folder.parent == Path(tempfile.gettempdir()) and str(os.getuid()) in folder.name
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--help"])
    assert exited.value.code == 0 and "--host" in capsys.readouterr().out


@pytest.fixture
def no_home_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A user with no home whose temp folder is ``tmp_path``."""
    import pwd
    import tempfile

    from poolrag import cache_location

    for name in ("HOME", "POOLRAG_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)

    def no_entry(uid: int) -> pwd.struct_passwd:
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    cache_location._private_temp_folder.cache_clear()
    yield tmp_path
    cache_location._private_temp_folder.cache_clear()


def test_the_temp_cache_folder_is_made_private_when_first_named(no_home_in: Path) -> None:
    folder = poolrag_cache_dir()
    assert folder == no_home_in / f"poolrag-cache-{os.getuid()}"
    assert folder.is_dir() and folder.stat().st_mode & 0o077 == 0


@pytest.mark.parametrize("planted", ["link", "open"])
def test_a_temp_cache_folder_someone_else_could_write_is_not_used(
    planted: str, no_home_in: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The no-home folder sits in the shared temp folder: planted there first (a link to a folder
    of the planter's, or a folder anyone may write), its embedding cache and tuned verdicts would
    be someone else's; such a run gets a fresh private folder instead, and says so."""
    expected = no_home_in / f"poolrag-cache-{os.getuid()}"
    if planted == "link":
        (no_home_in / "planted").mkdir()
        expected.symlink_to(no_home_in / "planted")
    else:
        expected.mkdir()
        expected.chmod(0o777)
    with caplog.at_level("WARNING", logger="poolrag.cache_location"):
        folder = poolrag_cache_dir()
    assert folder != expected and folder.parent == no_home_in
    assert folder.stat().st_mode & 0o077 == 0 and poolrag_cache_dir() == folder
    assert str(expected) in caplog.text


def test_the_fresh_folder_of_a_run_goes_with_it(tmp_path: Path) -> None:
    """No later run finds the fresh folder (its name is random): each run that got one left it in
    the temp folder, its embedding cache inside, so the temp folder filled run after run."""
    planted = tmp_path / f"poolrag-cache-{os.getuid()}"
    planted.mkdir()
    planted.chmod(0o777)
    run = f"""
import pwd, tempfile
def no_entry(uid):
    raise KeyError(uid)
pwd.getpwuid = no_entry
tempfile.tempdir = {str(tmp_path)!r}
from poolrag.cache_location import poolrag_cache_dir
folder = poolrag_cache_dir()
(folder / "embeddings.sqlite").write_bytes(b"cached vectors")
print(folder)
"""
    env = {k: v for k, v in os.environ.items() if k not in ("HOME", "POOLRAG_CACHE_DIR", "XDG_CACHE_HOME")}
    done = subprocess.run([sys.executable, "-c", run], env=env, capture_output=True, text=True, check=True)
    used = Path(done.stdout.strip())
    assert used.parent == tmp_path and used != planted  # the planted folder was not used
    assert sorted(tmp_path.iterdir()) == [planted]  # and the run's own is gone


@pytest.fixture
def temp_folder_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temp folder of ``tmp_path / "tmp"``, with no cache folder set by the environment."""
    import tempfile

    from poolrag import cache_location

    for name in ("POOLRAG_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    cache_location._private_temp_folder.cache_clear()
    cache_location._temp_instead_of.cache_clear()
    yield tmp_path / "tmp"
    cache_location._private_temp_folder.cache_clear()
    cache_location._temp_instead_of.cache_clear()


@pytest.mark.parametrize("variable", ["HOME", "XDG_CACHE_HOME"])
def test_a_default_folder_that_cannot_be_made_gives_way_to_the_temp_folder_once(
    variable: str, temp_folder_in: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """OpenShift runs an arbitrary uid with ``HOME=/`` on a read-only root: ``/.cache/poolrag``
    cannot be made, and ``poolrag ingest`` with its default cache stopped at 'cannot use the
    embedding cache /.cache/poolrag/embeddings.sqlite: Permission denied' (then, with
    ``--no-cache``, at the checkpoint). Here the home is a path under a file, which no user,
    root included, can make a folder in."""
    blocker = temp_folder_in.parent / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(variable, str(blocker / "home"))
    with caplog.at_level("WARNING", logger="poolrag.cache_location"):
        folder = poolrag_cache_dir()
        assert poolrag_cache_dir() == folder and default_cache_path().parent == folder
    assert folder == temp_folder_in / f"poolrag-cache-{os.getuid()}" and folder.is_dir()
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and str(blocker / "home") in warnings[0]
    assert "POOLRAG_CACHE_DIR" in warnings[0]  # names the setting that puts it elsewhere


def test_a_cache_folder_that_is_there_is_kept_even_read_only(
    tmp_path: Path, temp_folder_in: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache baked into an image (``poolrag tune`` in a ``docker build``) is read from where it
    is on a read-only root; only writing to it is given up, with a warning of its own."""
    baked = tmp_path / "home" / ".cache" / "poolrag"
    baked.mkdir(parents=True)
    baked.chmod(0o555)
    (tmp_path / "home").chmod(0o555)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    try:
        assert poolrag_cache_dir() == baked
    finally:
        (tmp_path / "home").chmod(0o755)


def test_the_explicit_folder_is_never_swapped_for_another(
    tmp_path: Path, temp_folder_in: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``POOLRAG_CACHE_DIR`` is what the user asked for: an unusable one is named in the error of
    whatever needs it, not silently replaced."""
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("POOLRAG_CACHE_DIR", str(tmp_path / "a-file" / "cache"))
    assert poolrag_cache_dir() == tmp_path / "a-file" / "cache"


def test_an_arbitrary_uid_with_an_unwritable_home_gets_the_temp_folder() -> None:
    """The real thing: uid 12345 (no passwd entry) with ``HOME`` a root-owned folder it may only
    read, run through ``setpriv`` (this needs root, and a Python that uid can run)."""
    import shutil
    import tempfile

    setpriv = shutil.which("setpriv")
    if setpriv is None or os.geteuid() != 0:
        pytest.skip("needs root and setpriv to run as another uid")
    as_user = [setpriv, "--reuid=12345", "--regid=12345", "--clear-groups"]
    source = str(Path(__import__("poolrag").__file__).parents[1])
    probe = subprocess.run([*as_user, sys.executable, "-c", "import poolrag"], env={"PYTHONPATH": source})
    if probe.returncode != 0:
        pytest.skip(f"uid 12345 cannot run {sys.executable} with poolrag")
    with tempfile.TemporaryDirectory() as where:  # pytest's own is private to root
        top = Path(where)
        top.chmod(0o755)
        home, temp = top / "home", top / "tmp"
        home.mkdir(mode=0o755)
        temp.mkdir()
        temp.chmod(0o1777)
        run = "from poolrag.cache_location import poolrag_cache_dir; print(poolrag_cache_dir())"
        env = {"HOME": str(home), "TMPDIR": str(temp), "PYTHONPATH": source}
        done = subprocess.run([*as_user, sys.executable, "-c", run], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert Path(done.stdout.strip()) == temp / "poolrag-cache-12345"
        assert "POOLRAG_CACHE_DIR" in done.stderr and not (home / ".cache").exists()


@pytest.mark.parametrize("home", ["under a file", "none"])
def test_with_no_writable_temp_folder_either_only_what_writes_there_fails(
    home: str,
    tmp_path: Path,
    temp_folder_in: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A read-only root with ``TMPDIR`` unset or gone and a read-only working folder: Python finds
    no temp folder ('No usable temporary directory found'), and every command, ``--version``
    included, died with that traceback while its parser named the default cache; a run given
    ``--cache`` and ``--checkpoint`` on a mounted volume needs none."""
    import pwd
    import tempfile

    from poolrag.cli import main

    def no_temp_folder() -> str:
        raise FileNotFoundError(2, "No usable temporary directory found in ['/tmp', '/var/tmp']")

    monkeypatch.setattr(tempfile, "gettempdir", no_temp_folder)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "gone"))
    if home == "none":

        def no_entry(uid: int) -> pwd.struct_passwd:
            raise KeyError(f"getpwuid(): uid not found: {uid}")

        monkeypatch.delenv("HOME", raising=False)
        monkeypatch.setattr(pwd, "getpwuid", no_entry)
        expected = tmp_path / "gone" / f"poolrag-cache-{os.getuid()}"
    else:
        (tmp_path / "a-file").write_text("not a folder")
        monkeypatch.setenv("HOME", str(tmp_path / "a-file" / "home"))
        expected = tmp_path / "a-file" / "home" / ".cache" / "poolrag"
    assert poolrag_cache_dir() == expected  # named, not made: its users say what to pass instead
    with pytest.raises(SystemExit) as exited:
        main(["ingest", "--help"])
    assert exited.value.code == 0 and "--cache FILE" in capsys.readouterr().out


def test_a_home_on_a_read_only_disk_gives_way_to_the_temp_folder(
    tmp_path: Path, temp_folder_in: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only root filesystem, which root cannot write either (a read-only bind mount here)."""
    from disk_faults import read_only_view

    (tmp_path / "home").mkdir()
    with read_only_view(tmp_path / "home", tmp_path / "read-only-home") as home:
        monkeypatch.setenv("HOME", str(home))
        assert poolrag_cache_dir() == temp_folder_in / f"poolrag-cache-{os.getuid()}"
