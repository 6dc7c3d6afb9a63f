"""The languages a model card declares: read from the front matter sentence-transformers writes
(a real ``SentenceTransformer.save``) and from the packaged all-MiniLM-L6-v2 card; anything that is
not a list of ISO 639 codes, or no card at all, is "unknown" (``()``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.model_card import SentenceTransformerModelCardData
from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

from poolrag.config.model_card import declared_languages
from poolrag.testing.tiny_models import build_encoder


@pytest.fixture(scope="module")
def backbone(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> Path:
    return build_encoder(tmp_path_factory.mktemp("card") / "backbone", "bert", minilm_path)


def _saved(backbone: Path, dest: Path, language: object) -> Path:
    transformer = Transformer(str(backbone))
    card = SentenceTransformerModelCardData(language=language)
    modules = [transformer, Pooling(transformer.get_embedding_dimension(), "mean")]
    SentenceTransformer(modules=modules, device="cpu", model_card_data=card).save(str(dest))
    return dest


def test_the_languages_a_saved_card_declares_are_read_as_codes(backbone: Path, tmp_path: Path) -> None:
    assert declared_languages(_saved(backbone, tmp_path / "two", ["it", "es"])) == ("es", "it")
    assert declared_languages(_saved(backbone, tmp_path / "one", "de")) == ("de",)


def test_the_packaged_minilm_declares_english(minilm_path: Path) -> None:
    assert declared_languages(minilm_path) == ("en",)


def test_a_card_without_codes_is_unknown(backbone: Path, tmp_path: Path) -> None:
    assert declared_languages(_saved(backbone, tmp_path / "none", None)) == ()
    assert declared_languages(_saved(backbone, tmp_path / "multi", ["multilingual"])) == ()
    assert declared_languages(_saved(backbone, tmp_path / "mixed", ["en", "multilingual"])) == ()
    assert declared_languages(backbone) == ()  # save_pretrained writes no card
    assert declared_languages(tmp_path / "missing") == ()
