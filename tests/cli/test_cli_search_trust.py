"""``poolrag search`` treats what a collection recorded as data: it never loads the model folder the
metadata names, and never turns on remote code because the metadata asks for it."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from poolrag import Engine
from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.cli import main
from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker, read_paths
from poolrag.stores import open_store

SAMPLES = Path(__file__).resolve().parents[2] / "samples"

EVIL_CODE = """
import pathlib
pathlib.Path({marker!r}).write_text("remote code ran")
from transformers import BertConfig as EvilConfig, BertModel as EvilModel
"""


def _ingest_recording(
    tmp_path: Path, minilm_path: Path, model_name: str, folder: Path, model_options: dict | None = None
) -> None:
    """Fill the Milvus collection ``shared`` in ``tmp_path`` with MiniLM's vectors of ``folder``,
    recording ``model_name`` (and ``model_options``) as the model that filled it."""
    engine = Engine(minilm_path)
    encoder = DenseEncoder(CachedEmbedder(engine, EmbeddingCache(tmp_path / "c.sqlite")))
    encoder.model_name = model_name  # what the collection records as its model
    store = open_store("milvus", "shared", uri=str(tmp_path / "m.db"))
    try:
        IngestPipeline(
            store,
            encoder,
            TokenChunker.for_model(engine.tokenizer, engine.facts),
            model_options=model_options or {},
            checkpoint_dir=tmp_path,
            progress=False,
        ).run(read_paths([folder]))
    finally:
        store.close()


@pytest.fixture
def booby_trapped_collection(tmp_path: Path, minilm_path: Path) -> tuple[list[str], Path, Path]:
    """A collection whose metadata names a model folder with an ``auto_map`` and asks for
    ``trust_remote_code``, as a shared .db file from someone else could."""
    marker = tmp_path / "remote-code-ran"
    evil = tmp_path / "shared-model"
    shutil.copytree(minilm_path, evil)
    (evil / "evil.py").write_text(EVIL_CODE.format(marker=str(marker)))
    config = json.loads((evil / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "evil.EvilConfig", "AutoModel": "evil.EvilModel"}
    (evil / "config.json").write_text(json.dumps(config))

    cache = tmp_path / "c.sqlite"
    options = {"trust_remote_code": True, "hf_overrides": {"auto_map": config["auto_map"]}}
    _ingest_recording(tmp_path, minilm_path, str(evil), SAMPLES / "nature", options)
    common = ["--uri", str(tmp_path / "m.db"), "--collection", "shared", "--cache", str(cache)]
    return common, evil, marker


def test_search_ignores_the_model_and_options_a_collection_recorded(
    booby_trapped_collection: tuple[list[str], Path, Path], capsys, caplog
) -> None:
    common, _, marker = booby_trapped_collection
    with caplog.at_level(logging.WARNING, logger="poolrag.cli.search"):
        assert main(["search", "why do corals turn white", "-k", "1", "--json", *common]) == 0
    assert not marker.exists()
    assert json.loads(capsys.readouterr().out)["source"].endswith("nature/coral-reefs.md")
    assert "ignoring model options recorded in the collection: trust_remote_code, hf_overrides.auto_map" in (
        caplog.text
    )


def test_naming_the_recorded_folder_still_runs_no_code_without_the_users_flag(
    booby_trapped_collection: tuple[list[str], Path, Path], capsys
) -> None:
    common, evil, marker = booby_trapped_collection
    code = main(["search", "why do corals turn white", "-k", "1", "--model", str(evil), *common])
    assert not marker.exists()  # loaded as transformers' own BERT, not with the folder's code
    assert code == 2  # and its config (auto_map added) is not the config the collection was filled with
    assert "search it with --model" in capsys.readouterr().err


def test_a_collection_of_another_model_is_refused_with_the_flag_to_pass(
    tmp_path: Path, minilm_path: Path, capsys
) -> None:
    other = tmp_path / "other-model"
    shutil.copytree(minilm_path, other)
    config = json.loads((other / "config.json").read_text())
    config["num_hidden_layers"] = 5  # other weights, other fingerprint
    (other / "config.json").write_text(json.dumps(config))
    common = ["--uri", str(tmp_path / "m.db"), "--collection", "c", "--cache", str(tmp_path / "c.sqlite")]
    assert main(["ingest", str(SAMPLES / "music"), "--model", str(other), "--quiet", *common]) == 0
    capsys.readouterr()
    assert main(["search", "a song", *common]) == 2
    err = capsys.readouterr().err
    assert f"search it with --model {other}" in err
    # ingested with the packaged default model, searched with another: the hub id, not a venv path
    assert (
        main(
            [
                "ingest",
                str(SAMPLES / "music"),
                "--model",
                str(minilm_path),
                "--quiet",
                *common,
                "--collection",
                "d",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["search", "a song", "--model", str(other), *common, "--collection", "d"]) == 2
    err = capsys.readouterr().err
    assert "search it with --model sentence-transformers/all-MiniLM-L6-v2" in err
    assert "filled with sentence-transformers/all-MiniLM-L6-v2@" in err and "site-packages" not in err


def test_a_recorded_model_name_reaches_the_terminal_escaped_and_quoted(
    tmp_path: Path, minilm_path: Path, capsys
) -> None:
    """A shared collection's record is someone else's text: its terminal escapes reached the
    refusal raw, and its suggested command could smuggle in a flag."""
    recorded = "x\x1b]0;TITLE\x07\x1b[31mRED --trust-remote-code"
    _ingest_recording(tmp_path, minilm_path, recorded, SAMPLES / "music")
    other = tmp_path / "other-model"
    shutil.copytree(minilm_path, other)
    config = json.loads((other / "config.json").read_text())
    config["num_hidden_layers"] = 5  # other weights: the search is refused, naming the recorded model
    (other / "config.json").write_text(json.dumps(config))
    common = [
        "--uri",
        str(tmp_path / "m.db"),
        "--collection",
        "shared",
        "--cache",
        str(tmp_path / "c.sqlite"),
    ]
    assert main(["search", "a song", "--model", str(other), *common]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err
    assert "search it with --model 'x\\x1b]0;TITLE\\x07\\x1b[31mRED --trust-remote-code'" in err


def test_stored_text_and_source_names_reach_the_terminal_escaped(
    tmp_path: Path, minilm_path: Path, capsys
) -> None:
    """A document's text and its file's name are someone else's characters too: printed raw, an
    escape sequence in either retitled and cleared the reader's terminal."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "b\x1b[31mred.txt").write_text(
        "Cats purr \x1b]0;TITLE-HIJACK\x07 \x1b[2J when they are content."
    )
    common = ["--uri", str(tmp_path / "m.db"), "--collection", "c", "--cache", str(tmp_path / "c.sqlite")]
    assert main(["ingest", str(corpus), "--model", str(minilm_path), "--quiet", *common]) == 0
    capsys.readouterr()
    assert main(["search", "cats", "-k", "1", "--model", str(minilm_path), *common]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "b\\x1b[31mred.txt" in out and "Cats purr \\x1b]0;TITLE-HIJACK\\x07 \\x1b[2J when" in out
