"""ColBERT selected by architecture name (vLLM's ``ColBERTModernBertModel``, ``ColBERTJinaRobertaModel``)
on folders that carry the projection in the main checkpoint.

Reference, by hand: the backbone's hidden states (transformers) → projection → L2 per token. As in
vLLM, such folders without PyLate settings get no markers, no query expansion and no skiplist.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file
from tiny_models import HIDDEN

from poolrag import Engine, PoolingParams
from poolrag.errors import ModelLoadError

DIM = 12
TEXTS = [
    "what is late interaction?",
    "Late interaction scores every query token, against every document token!",
]


def _with_projection(source: Path, dest: Path, key: str, prefix: str = "") -> tuple[Path, torch.Tensor]:
    shutil.copytree(source, dest)
    state = {f"{prefix}{k}": v for k, v in load_file(str(dest / "model.safetensors")).items()}
    torch.manual_seed(11)
    weight = torch.randn(DIM, HIDDEN)
    state[key] = weight
    save_file(state, str(dest / "model.safetensors"))
    return dest, weight


def _reference(folder: Path, weight: torch.Tensor, text: str) -> np.ndarray:
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModel.from_pretrained(folder).eval()
    ids = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        hidden = model(input_ids=ids["input_ids"], attention_mask=ids["attention_mask"]).last_hidden_state[0]
    return torch.nn.functional.normalize(hidden @ weight.T, dim=-1).numpy()


CASES = {
    # name: (backbone, checkpoint key of the projection, prefix of the backbone's keys)
    "ColBERTModernBertModel": ("modernbert", "linear.weight", ""),
    "ColBERTJinaRobertaModel": ("xlm-roberta", "colbert_linear.weight", "roberta."),
}


@pytest.mark.parametrize("model_impl", ["auto", "transformers"])
@pytest.mark.parametrize("architecture", sorted(CASES))
def test_named_colbert_projects_every_token(tiny_model, tmp_path, architecture, model_impl):
    backbone, key, prefix = CASES[architecture]
    folder, weight = _with_projection(tiny_model(backbone), tmp_path / "colbert", key, prefix)
    engine = Engine(folder, hf_overrides={"architectures": [architecture]}, model_impl=model_impl)
    assert engine.supported_tasks == ("token_embed", "score") and engine.score_kind == "maxsim"
    assert engine.embedding_dim == DIM
    for input_type in ("query", "document"):
        outputs = engine.encode(TEXTS, "token_embed", PoolingParams(input_type=input_type))
        for text, out in zip(TEXTS, outputs, strict=True):
            expected = _reference(folder, weight, text)
            assert out.outputs.data.shape == expected.shape
            np.testing.assert_allclose(out.outputs.data, expected, rtol=1e-5, atol=1e-5)
    q, d = (_reference(folder, weight, t) for t in TEXTS)
    score = engine.score(TEXTS[0], TEXTS[1])[0].outputs.score
    np.testing.assert_allclose(score, (q @ d.T).max(axis=1).sum(), rtol=1e-5, atol=1e-4)


def test_a_named_colbert_without_its_projection_is_refused(tiny_model):
    with pytest.raises(ModelLoadError, match="projection"):
        Engine(tiny_model("modernbert"), hf_overrides={"architectures": ["ColBERTModernBertModel"]})


def test_pylate_settings_still_apply_to_a_named_colbert(tiny_model, tmp_path):
    folder, _ = _with_projection(tiny_model("modernbert"), tmp_path / "pylate", "linear.weight")
    (folder / "config_sentence_transformers.json").write_text(
        json.dumps({"query_prefix": "[unused0]", "document_prefix": "[unused1]", "query_length": 16})
    )
    engine = Engine(folder, hf_overrides={"architectures": ["ColBERTModernBertModel"]})
    query = engine.encode(TEXTS[:1], "token_embed", PoolingParams(input_type="query"))[0]
    assert query.outputs.data.shape == (16, DIM)  # marker and [MASK] expansion, as PyLate encodes
