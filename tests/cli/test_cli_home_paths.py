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
