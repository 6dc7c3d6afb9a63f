"""How many tokens a loaded model reads: the limit sentence-transformers truncates at."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from poolrag import Engine
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
