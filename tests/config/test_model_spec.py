"""What ``load_model_spec`` reads from a folder's files, and what it refuses, on folders that hold a
config.json alone (no weights are read)."""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
from transformers import BertConfig

from poolrag.config.model_spec import load_model_spec
from poolrag.errors import ModelLoadError

_TRANSFORMER = {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}
_DROPOUT = {"idx": 1, "name": "1", "path": "1_Dropout", "type": "sentence_transformers.models.Dropout"}


def _folder(tmp_path: Path, **config: object) -> Path:
    BertConfig(architectures=["BertModel"], **config).save_pretrained(tmp_path)
    return tmp_path


def test_an_unknown_convert_is_refused_before_the_folder_is_read(tmp_path: Path) -> None:
    with pytest.raises(
        ModelLoadError, match=r"^convert must be 'embed', 'classify' or 'reward', not 'rank'$"
    ):
        load_model_spec(tmp_path / "missing", None, False, convert="rank")


def test_modules_json_that_is_not_a_list_is_refused(tmp_path: Path) -> None:
    (_folder(tmp_path) / "modules.json").write_text(json.dumps({"0": _TRANSFORMER}))
    with pytest.raises(ModelLoadError, match=r"modules\.json: expected a list of modules$"):
        load_model_spec(tmp_path, None, False)


def test_a_dropout_module_changes_nothing(tmp_path: Path) -> None:
    (_folder(tmp_path) / "modules.json").write_text(json.dumps([_DROPOUT, _TRANSFORMER]))
    spec = load_model_spec(tmp_path, None, False)
    assert spec.is_sentence_transformers
    assert spec.transformer_path == tmp_path
    assert spec.dense == []
    assert spec.pooler_defaults.pooling_type is None


def test_a_cross_encoders_activation_in_a_config_section_wins_over_the_oldest_key(tmp_path: Path) -> None:
    folder = _folder(
        tmp_path,
        sentence_transformers={"activation_fn": "torch.nn.modules.activation.Sigmoid"},
        sbert_ce_default_activation_function="torch.nn.modules.linear.Identity",
    )
    spec = load_model_spec(folder, None, False)
    assert spec.cross_encoder_activation == "torch.nn.modules.activation.Sigmoid"


def test_a_cross_encoders_activation_in_its_own_config_file_wins(tmp_path: Path) -> None:
    folder = _folder(tmp_path, sentence_transformers={"activation_fn": "torch.nn.modules.activation.Sigmoid"})
    (folder / "config_sentence_transformers.json").write_text(
        json.dumps({"activation_fn": "torch.nn.modules.activation.Tanh"})
    )
    spec = load_model_spec(folder, None, False)
    assert spec.cross_encoder_activation == "torch.nn.modules.activation.Tanh"


def test_pylate_defaults_stand_only_for_settings_absent_or_null(tmp_path: Path) -> None:
    """As PyLate loads its settings: an empty skiplist is a skiplist (every token kept), a null
    key takes PyLate's default (query expansion on, the punctuation skiplist)."""
    folder = _folder(tmp_path)
    settings = folder / "config_sentence_transformers.json"
    settings.write_text(json.dumps({"query_length": 8, "skiplist_words": [], "do_query_expansion": None}))
    colbert = load_model_spec(folder, None, False).colbert
    assert colbert is not None
    assert colbert.skiplist_words == () and colbert.do_query_expansion
    settings.write_text(json.dumps({"query_length": 8, "skiplist_words": None, "query_prefix": None}))
    colbert = load_model_spec(folder, None, False).colbert
    assert colbert is not None
    assert colbert.skiplist_words == tuple(string.punctuation) and colbert.query_prefix == "[Q] "
