"""A loaded model's tokenizer: built from what its folder holds, and how many tokens it reads (the
limit sentence-transformers truncates at)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from poolrag import Engine, ModelLoadError
from poolrag.testing.long_texts import long_paragraph
from poolrag.testing.tiny_models import (
    SENTENCES,
    write_legacy_sentence_transformers_names,
    write_sentence_transformers,
)


def _legacy_folder(tiny_model, tmp_path: Path, max_seq_length: int, model_max_length: int) -> Path:
    """A hub-style folder (sentence-transformers 2-5): ``max_seq_length`` in
    ``sentence_bert_config.json``, the tokenizer's own ``model_max_length`` beside it."""
    folder = tmp_path / "bert"
    shutil.copytree(tiny_model("bert"), folder)
    write_sentence_transformers(folder, pooling="mean", normalize=True)
    write_legacy_sentence_transformers_names(folder)
    settings = {"max_seq_length": max_seq_length, "do_lower_case": False}
    (folder / "sentence_bert_config.json").write_text(json.dumps(settings))
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    tokenizer_config["model_max_length"] = model_max_length
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    return folder


@pytest.mark.parametrize(("max_seq_length", "model_max_length"), [(200, 64), (64, 200)])
def test_the_folders_max_seq_length_is_the_limit_as_in_sentence_transformers(
    tiny_model, tmp_path: Path, max_seq_length: int, model_max_length: int
) -> None:
    """sentence-transformers truncates at ``max_seq_length`` when the folder names one, above the
    tokenizer's ``model_max_length`` too; the tokenizer's was taken when smaller (64 tokens of a
    250-token text embedded where sentence-transformers embeds 200: max difference 0.12)."""
    folder = _legacy_folder(tiny_model, tmp_path, max_seq_length, model_max_length)
    st = SentenceTransformer(str(folder), device="cpu")
    engine = Engine(folder)
    assert engine.max_model_len == st.max_seq_length == max_seq_length
    texts = [long_paragraph(st.tokenizer, 0, tokens=250), *SENTENCES]
    np.testing.assert_allclose(engine.embed_array(texts), st.encode(texts), atol=1e-5, rtol=0)


def test_a_slow_tokenizer_folder_with_an_unbounded_model_max_length_truncates_as_sentence_transformers(
    tiny_model, tmp_path: Path
) -> None:
    """A hub folder saved before fast tokenizers (``vocab.txt``, no ``tokenizer.json``) whose
    tokenizer_config says ``model_max_length`` 1e30 (transformers' "no limit", as many hub models
    have it) and whose sentence_bert_config names no length: the position table is the limit."""
    folder = tmp_path / "slow"
    shutil.copytree(tiny_model("bert"), folder)
    write_sentence_transformers(folder, pooling="mean", normalize=True)
    (folder / "tokenizer.json").unlink()
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    tokenizer_config["model_max_length"] = int(1e30)
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"do_lower_case": False}))
    st = SentenceTransformer(str(folder), device="cpu")
    engine = Engine(folder)
    positions = json.loads((folder / "config.json").read_text())["max_position_embeddings"]
    assert engine.max_model_len == st.max_seq_length == positions
    texts = [long_paragraph(st.tokenizer, 0, tokens=positions + 100), *SENTENCES]
    np.testing.assert_allclose(engine.embed_array(texts), st.encode(texts), atol=1e-5, rtol=0)


def _sentencepiece_model(path: Path) -> None:
    """A unigram sentencepiece model as the sentencepiece trainer writes one (its protobuf, through
    the copy of the schema transformers ships), for a tokenizer saved without a tokenizer.json."""
    from transformers.utils import sentencepiece_model_pb2_new as proto

    model = proto.ModelProto()
    model.trainer_spec.model_type = proto.TrainerSpec.UNIGRAM
    model.trainer_spec.unk_id, model.trainer_spec.bos_id, model.trainer_spec.eos_id = 0, 1, 2
    model.trainer_spec.pad_id = -1
    model.normalizer_spec.name, model.normalizer_spec.add_dummy_prefix = "identity", True
    for piece, kind in (("<unk>", proto.ModelProto.SentencePiece.UNKNOWN), ("<s>", 3), ("</s>", 3)):
        entry = model.pieces.add()
        entry.piece, entry.score, entry.type = piece, 0.0, kind
    for rank, piece in enumerate(["▁", "▁pool", "ing", "▁model", "s", "p", "o", "l", "i", "n", "g"]):
        entry = model.pieces.add()
        entry.piece, entry.score, entry.type = piece, -float(rank), proto.ModelProto.SentencePiece.NORMAL
    path.write_bytes(model.SerializeToString())


def test_a_sentencepiece_tokenizer_without_the_package_names_it(
    tiny_model, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """XLM-R's older derivatives ship ``sentencepiece.bpe.model`` and no tokenizer.json. Without the
    sentencepiece package (not a dependency of poolrag, transformers or sentence-transformers)
    transformers read the file as a tiktoken vocabulary: "Error parsing line b'\\x0e'"."""
    import sys

    folder = tmp_path / "xlmr"
    shutil.copytree(tiny_model("xlm-roberta"), folder)
    for name in ("tokenizer.json", "vocab.txt", "special_tokens_map.json"):
        (folder / name).unlink(missing_ok=True)
    _sentencepiece_model(folder / "sentencepiece.bpe.model")
    settings = {"model_max_length": 512, "tokenizer_class": "XLMRobertaTokenizer"}
    (folder / "tokenizer_config.json").write_text(json.dumps(settings))
    monkeypatch.setitem(sys.modules, "sentencepiece", None)  # as on a machine without it
    with pytest.raises(
        ModelLoadError, match=r"sentencepiece model \(sentencepiece\.bpe\.model\) .*pip install"
    ):
        Engine(folder)
