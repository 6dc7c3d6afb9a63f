"""ColBERT selected by architecture name (vLLM's ``ColBERTModernBertModel``, ``ColBERTJinaRobertaModel``)
on folders that carry the projection in the main checkpoint.

Reference, by hand: the backbone's hidden states (transformers) → projection → L2 per token. As
vLLM encodes such folders without PyLate settings: the marker the tokenizer knows after [CLS]
([unused0] / [unused1] in this vocabulary), queries cut to and padded with [MASK] to 32 tokens,
all attended, and no skiplist.
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

from poolrag import Engine, PoolingParams
from poolrag.errors import ModelLoadError
from poolrag.testing.tiny_models import HIDDEN

DIM = 12
QUERY_LEN = 32
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


def _reference(folder: Path, weight: torch.Tensor, text: str, is_query: bool) -> np.ndarray:
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModel.from_pretrained(folder).eval()
    if is_query:
        ids = tokenizer(text, truncation=True, max_length=QUERY_LEN - 1)["input_ids"]
        ids += [tokenizer.mask_token_id] * (QUERY_LEN - 1 - len(ids))
    else:
        ids = tokenizer(text)["input_ids"]
    ids.insert(1, tokenizer.convert_tokens_to_ids("[unused0]" if is_query else "[unused1]"))
    with torch.no_grad():
        hidden = model(input_ids=torch.tensor([ids])).last_hidden_state[0]
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
            expected = _reference(folder, weight, text, input_type == "query")
            assert out.outputs.data.shape == expected.shape
            np.testing.assert_allclose(out.outputs.data, expected, rtol=1e-5, atol=1e-5)
    q, d = _reference(folder, weight, TEXTS[0], True), _reference(folder, weight, TEXTS[1], False)
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
