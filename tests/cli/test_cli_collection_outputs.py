"""A collection records how its model's outputs were made (pooling, normalisation, tokenizer), not
only which weights: the same folder pooled another way writes and queries other vectors, and a run
that would mix them is refused in one line (a CLS-pooled kimchi note outranked sourdough for a
sourdough query against a mean-pooled collection)."""

from __future__ import annotations

from pathlib import Path

import pytest

from poolrag.cli import main

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
CLS = ["--pooler-config", '{"pooling_type": "CLS"}']


@pytest.mark.parametrize("kind", ["milvus", "qdrant"])
def test_the_same_weights_pooled_otherwise_are_refused_by_ingest_and_search(
    kind: str, tmp_path: Path, minilm_path: Path, capsys
) -> None:
    where = ["--uri", str(tmp_path / "m.db")] if kind == "milvus" else ["--path", str(tmp_path / "q")]
    common = ["--store", kind, *where, "--collection", "docs", "--model", str(minilm_path)]
    common += ["--cache", str(tmp_path / "c.sqlite")]
    assert main(["ingest", str(SAMPLES / "cooking"), "--quiet", *common]) == 0
    capsys.readouterr()
    assert main(["ingest", str(SAMPLES / "nature"), "--quiet", *common, *CLS]) == 2
    refused = capsys.readouterr().err
    assert "holds other vectors than this run makes (the model's outputs" in refused
    assert "--pooler-config" in refused
    assert main(["search", "sourdough starter", "-k", "2", *common, *CLS]) == 2
    assert "pooled as it was" in capsys.readouterr().err
    assert main(["search", "sourdough starter", "-k", "2", *common]) == 0  # pooled as it was: answered
    assert "sourdough" in capsys.readouterr().out
