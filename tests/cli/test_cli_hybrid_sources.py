"""The sparse source of a hybrid collection is chosen by one rule for ``poolrag ingest --hybrid`` and
``poolrag eval`` (which ingests like it): a ColBERT model, whose token vectors have no hybrid
search, is refused by both in the same one line, before any store is written; BM25 counts the word
pieces of the tokenizer the run was given."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from poolrag.cli import main
from poolrag.sparse import BM25Encoder
from poolrag.stores import open_store

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


def _cased_tokenizer(minilm_path: Path, folder: Path) -> Path:
    """MiniLM's tokenizer that keeps case: other word pieces for every capitalised word."""
    folder.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(minilm_path / name, folder / name)
    definition = json.loads((folder / "tokenizer.json").read_text())
    definition["normalizer"]["lowercase"] = False
    (folder / "tokenizer.json").write_text(json.dumps(definition))
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps(config | {"do_lower_case": False}))
    return folder


def test_bm25_terms_are_counted_by_the_tokenizer_given_not_read_from_another_ones_cache(
    tmp_path: Path, minilm_path: Path, capsys
) -> None:
    """The term counts cache is shared by every collection; a run with --tokenizer counts in its word
    pieces, even where a run of the same weights with their own tokenizer cached counts of the same
    chunks (the weights' identity is the same, the tokenizer is not)."""
    from transformers import AutoTokenizer

    cased = _cased_tokenizer(minilm_path, tmp_path / "cased")
    common = ["--store", "qdrant", "--path", str(tmp_path / "q"), "--model", str(minilm_path)]
    common += ["--cache", str(tmp_path / "c.sqlite"), "--hybrid", "--chunk-tokens", "48", "--quiet"]
    assert main(["ingest", str(SAMPLES / "nature"), *common, "--collection", "own"]) == 0
    assert (
        main(["ingest", str(SAMPLES / "nature"), *common, "--collection", "cased", "--tokenizer", str(cased)])
        == 0
    )
    capsys.readouterr()
    store = open_store("qdrant", "cased", path=str(tmp_path / "q"))
    try:
        ids: list[str] = []
        store.scan_sources(lambda page: ids.extend(cid for cid, _ in page))
        anyone = store.fetch_vectors(ids[:1])[ids[0]]
        texts = [
            hit.payload["text"]
            for hit in sorted(store.search(anyone, len(ids)), key=lambda h: ids.index(h.id))
        ]
        stored = store.fetch_sparse(ids)
    finally:
        store.close()
    counts = BM25Encoder(AutoTokenizer.from_pretrained(cased)).term_counts(texts)
    uncased = BM25Encoder(AutoTokenizer.from_pretrained(minilm_path)).term_counts(texts)
    assert counts != uncased  # the two tokenizers split these chunks differently
    assert [sorted(stored[i].indices.tolist()) for i in ids] == [sorted(c) for c in counts]
