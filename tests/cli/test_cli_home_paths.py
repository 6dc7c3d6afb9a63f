"""A store or checkpoint path written ``--path=~/q`` reaches poolrag with its ``~`` (a shell
expands a tilde only at a word's start or after an assignment's ``=``, not after ``--path=``; a
config or env file never). Taken as is, it made a folder literally named ``~`` in the working
directory (one ``rm -rf ~`` away from the home folder) and Milvus Lite refused ``--uri=~/m.db``;
it means the home folder, as it does for ``--cache``, ``--model`` and ``POOLRAG_CACHE_DIR``."""

from __future__ import annotations

from pathlib import Path

import pytest

from poolrag.cli import main

LOCATIONS = {
    "milvus": ("--uri=~/m.db", "m.db"),  # Milvus Lite makes no missing folder
    "qdrant": ("--path=~/stores/q", "stores/q"),
    "qdrant-edge": ("--path=~/stores/e", "stores/e"),
}


@pytest.mark.parametrize("kind", LOCATIONS)
def test_a_tilde_in_a_store_or_checkpoint_flag_is_the_home_folder(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    (work / "docs").mkdir(parents=True)
    (work / "docs" / "bees.txt").write_text("Honeybee foragers dance to show where flowers are.")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("POOLRAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(work)
    flag, under_home = LOCATIONS[kind]
    where = ["--store", kind, flag, "--collection", "c"]

    code = main(["ingest", "docs", *where, "--checkpoint=~/ck/run.json", "--no-cache", "-q"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert not (work / "~").exists()
    assert (home / under_home).exists() and (home / "ck").is_dir()
    assert f"in {home / under_home}" in out  # the summary says where the collection is

    assert main(["search", "where are the flowers?", *where, "--no-cache", "-k", "1", "-q"]) == 0
    assert "bees.txt" in capsys.readouterr().out


def test_ingest_with_a_home_it_cannot_write_keeps_its_cache_in_the_temp_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """OpenShift's arbitrary uid gets ``HOME=/`` on a read-only root: the README's ``poolrag
    ingest samples --collection demo`` stopped at 'cannot use the embedding cache
    /.cache/poolrag/embeddings.sqlite: Permission denied', and with ``--no-cache`` at the
    checkpoint. The home here is a path under a file, which root cannot make a folder in either."""
    import os
    import tempfile

    from poolrag import cache_location

    (tmp_path / "a-file").write_text("not a folder")
    (tmp_path / "tmp").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "bees.txt").write_text("Honeybee foragers dance to show where flowers are.")
    for name in ("POOLRAG_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "a-file" / "home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.chdir(tmp_path)
    cache_location._private_temp_folder.cache_clear()
    cache_location._temp_instead_of.cache_clear()
    try:
        where = ["--store", "qdrant", "--path", "q", "--collection", "c"]
        assert main(["ingest", "docs", *where, "-q"]) == 0, capsys.readouterr()
        assert main(["search", "where are the flowers?", *where, "-k", "1", "-q"]) == 0
        assert "bees.txt" in capsys.readouterr().out
    finally:
        cache_location._private_temp_folder.cache_clear()
        cache_location._temp_instead_of.cache_clear()
    cache = tmp_path / "tmp" / f"poolrag-cache-{os.getuid()}"
    assert (cache / "embeddings.sqlite").is_file() and (cache / "checkpoints").is_dir()
