"""Architectures that exist only as remote code (NomicBert, GteNew) load with trust_remote_code.

The test writes a tiny model folder with its own configuration and modeling files, exactly the
shape of such hub repositories (``auto_map`` in config.json).
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from poolrag import Engine, ModelLoadError
from poolrag.testing.tiny_models import copy_tokenizer, write_sentence_transformers

CONFIGURATION = """
from transformers import PretrainedConfig


class TinyRemoteConfig(PretrainedConfig):
    model_type = "tiny_remote_bert"

    def __init__(self, vocab_size=30522, hidden_size=32, num_layers=2, pad_token_id=0, **kwargs):
        super().__init__(pad_token_id=pad_token_id, **kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.max_position_embeddings = 512
"""

MODELING = """
import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput

from .configuration_tiny import TinyRemoteConfig


class TinyRemoteModel(PreTrainedModel):
    config_class = TinyRemoteConfig
    base_model_prefix = "tiny"

    def __init__(self, config):
        super().__init__(config)
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        layer = nn.TransformerEncoderLayer(config.hidden_size, 2, 48, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, config.num_layers, enable_nested_tensor=False)
        self.post_init()

    def get_input_embeddings(self):
        return self.embed

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, **kwargs):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)[None, :]
        hidden = self.embed(input_ids) + self.position(positions)
        pad = None if attention_mask is None else attention_mask == 0
        return BaseModelOutput(last_hidden_state=self.encoder(hidden, src_key_padding_mask=pad))
"""


def write_remote_encoder(folder: Path, tokenizer_src: Path) -> Path:
    """A tiny backbone that exists only as remote code (``auto_map``), random weights saved
    through the remote class itself, in ``folder`` (created)."""
    import torch
    from transformers import AutoConfig, AutoModel

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "configuration_tiny.py").write_text(textwrap.dedent(CONFIGURATION))
    (folder / "modeling_tiny.py").write_text(textwrap.dedent(MODELING))
    config = {
        "model_type": "tiny_remote_bert",
        "architectures": ["TinyRemoteModel"],
        "auto_map": {
            "AutoConfig": "configuration_tiny.TinyRemoteConfig",
            "AutoModel": "modeling_tiny.TinyRemoteModel",
        },
        "vocab_size": 30522,
        "hidden_size": 32,
        "num_layers": 2,
        "pad_token_id": 0,
    }
    (folder / "config.json").write_text(json.dumps(config))
    copy_tokenizer(tokenizer_src, folder)
    torch.manual_seed(3)
    remote_config = AutoConfig.from_pretrained(folder, trust_remote_code=True)
    AutoModel.from_config(remote_config, trust_remote_code=True).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def remote_folder(tmp_path_factory, minilm_path) -> Path:
    folder = write_remote_encoder(tmp_path_factory.mktemp("remote"), minilm_path)
    for name in ("configuration_tiny.py", "modeling_tiny.py"):
        if not (folder / name).exists():
            raise AssertionError("save_pretrained dropped the remote code")
    return folder


def test_remote_code_is_refused_by_default(remote_folder) -> None:
    with pytest.raises(ModelLoadError, match="trust_remote_code"):
        Engine(remote_folder)


def test_remote_code_model_matches_sentence_transformers(remote_folder, tmp_path) -> None:
    folder = tmp_path / "st"
    shutil.copytree(remote_folder, folder)
    write_sentence_transformers(folder, pooling="mean", normalize=True)
    texts = ["remote code models", "are loaded only when trusted", "ok"]
    reference = SentenceTransformer(str(folder), device="cpu", trust_remote_code=True).encode(texts)
    ours = Engine(folder, trust_remote_code=True).embed_array(texts)
    np.testing.assert_allclose(ours, reference, atol=1e-5)
