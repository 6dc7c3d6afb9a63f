"""A collection records how its model's outputs were made (pooling, normalisation, tokenizer), not
only which weights: the same folder pooled another way writes and queries other vectors, and a run
that would mix them is refused in one line (a CLS-pooled kimchi note outranked sourdough for a
sourdough query against a mean-pooled collection)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from poolrag.cli import main
from poolrag.stores import open_store

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


def test_a_collection_an_older_poolrag_pooled_otherwise_says_to_ingest_again(
    tmp_path: Path, minilm_path: Path, capsys
) -> None:
    """Before 0d06409c poolrag pooled a [Pooling, Normalize, Dense] folder otherwise and recorded
    that fingerprint: after the upgrade, search with the very options of the ingest was refused and
    told to search 'pooled as it was', which no option of the new poolrag does."""
    common = ["--store", "qdrant", "--path", str(tmp_path / "q"), "--collection", "docs"]
    common += ["--model", str(minilm_path), "--cache", str(tmp_path / "c.sqlite")]
    assert main(["ingest", str(SAMPLES / "cooking"), "--quiet", *common]) == 0
    with open_store("qdrant", "docs", path=str(tmp_path / "q")) as store:
        spec = store.read_spec()
        assert spec is not None
        assert spec.model_outputs != "54545dc9836f1866"
        # the record as the older poolrag wrote it: another fingerprint of the same weights' outputs
        store._write_spec(dataclasses.replace(spec, model_outputs="54545dc9836f1866"))
    capsys.readouterr()
    assert main(["search", "sourdough starter", "-k", "2", *common]) == 2
    assert "ingest again into a new collection" in capsys.readouterr().err
