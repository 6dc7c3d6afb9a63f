"""The sparse source of a hybrid collection is chosen by one rule for ``poolrag ingest --hybrid`` and
``poolrag eval`` (which ingests like it): a ColBERT model, whose token vectors have no hybrid
search, is refused by both in the same one line, before any store is written."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from poolrag.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "evaluation"))
from test_eval_run import write_dataset

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
REFUSAL = "hybrid search goes with single-vector models, not token vectors (ColBERT, ColPali)"


@pytest.mark.parametrize("command", ["ingest", "eval"])
def test_a_colbert_model_is_refused_in_one_line_by_both_commands(
    command: str, tmp_path: Path, assets: Path, capsys
) -> None:
    model = ["--model", str(assets / "colbert-pylate")]
    where = ["--store", "qdrant", "--path", str(tmp_path / "q"), "--cache", str(tmp_path / "c.sqlite")]
    if command == "ingest":
        argv = ["ingest", str(SAMPLES / "music"), "--hybrid", *model, *where, "--quiet"]
    else:
        argv = ["eval", str(write_dataset(tmp_path / "beir")), *model, *where, "-q"]
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and err.endswith(REFUSAL)
    assert not (tmp_path / "q").exists()  # refused before the store was opened
