"""ColBERT `token_embed` and MaxSim scoring, for PyLate and Stanford `HF_ColBERT` folders.

The reference is the published procedure computed by hand with transformers: marker token after
[CLS]; queries padded with [MASK] to ``query_length`` (expansion tokens not attended to, but kept);
documents truncated to ``document_length`` with punctuation dropped; projection; L2 per token.
"""

from __future__ import annotations

import json
import shutil
import string
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file

from poolrag import Engine, PoolingParams
from poolrag.errors import DimensionsError, InvalidInputError
from poolrag.testing.tiny_models import HIDDEN

DIM = 16
QUERY_LEN, DOC_LEN = 12, 20


def _pylate_folder(tiny_model, tmp_path: Path) -> Path:
    folder = tmp_path / "pylate"
    shutil.copytree(tiny_model("bert"), folder)
    torch.manual_seed(7)
    dense = folder / "1_Dense"
    dense.mkdir()
    save_file({"linear.weight": torch.randn(DIM, HIDDEN)}, str(dense / "model.safetensors"))
    (dense / "config.json").write_text(
        json.dumps(
            {
                "in_features": HIDDEN,
                "out_features": DIM,
                "bias": False,
                "activation_function": "torch.nn.modules.linear.Identity",
            }
        )
    )
    (folder / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Dense", "type": "pylate.models.Dense.Dense"},
            ]
        )
    )
    (folder / "config_sentence_transformers.json").write_text(
        json.dumps(
            {
                "query_prefix": "[unused0]",
                "document_prefix": "[unused1]",
                "query_length": QUERY_LEN,
                "document_length": DOC_LEN,
                "attend_to_expansion_tokens": False,
                "skiplist_words": list(string.punctuation),
                "do_query_expansion": True,
                "similarity_fn_name": "MaxSim",
            }
        )
    )
    return folder


def _stanford_folder(pylate: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "stanford"
    folder.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(pylate / name, folder / name)
    state = {f"bert.{k}": v for k, v in load_file(str(pylate / "model.safetensors")).items()}
    state["linear.weight"] = load_file(str(pylate / "1_Dense" / "model.safetensors"))["linear.weight"]
    save_file(state, str(folder / "model.safetensors"))
    config = json.loads((pylate / "config.json").read_text())
    config["architectures"] = ["HF_ColBERT"]
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "artifact.metadata").write_text(
        json.dumps(
            {
                "query_token_id": "[unused0]",
                "doc_token_id": "[unused1]",
                "query_maxlen": QUERY_LEN,
                "doc_maxlen": DOC_LEN,
                "attend_to_mask_tokens": False,
                "mask_punctuation": True,
                "dim": DIM,
            }
        )
    )
    return folder


def _reference(folder: Path, text: str, is_query: bool, length: int | None = None) -> np.ndarray:
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModel.from_pretrained(folder).eval()
    weight = load_file(str(folder / "1_Dense" / "model.safetensors"))["linear.weight"]
    length = length or (QUERY_LEN if is_query else DOC_LEN)
    ids = tokenizer(text, truncation=True, max_length=length - 1)["input_ids"]
    attend = [1] * len(ids)
    if is_query:
        pad = length - 1 - len(ids)
        ids, attend = ids + [tokenizer.mask_token_id] * pad, attend + [0] * pad
    marker = tokenizer.convert_tokens_to_ids("[unused0]" if is_query else "[unused1]")
    ids, attend = [ids[0], marker, *ids[1:]], [1, 1, *attend[1:]]
    with torch.no_grad():
        hidden = model(
            input_ids=torch.tensor([ids]), attention_mask=torch.tensor([attend])
        ).last_hidden_state[0]
    vectors = torch.nn.functional.normalize(hidden @ weight.T, dim=-1)
    if not is_query:
        skip = {tokenizer.convert_tokens_to_ids(p) for p in string.punctuation}
        vectors = vectors[[i for i, t in enumerate(ids) if t not in skip]]
    return vectors.numpy()


QUERIES = ["what is late interaction?", "a very long query " * 10]
DOCUMENTS = [
    "Late interaction scores every query token, against every document token!",
    "Unrelated: the weather, today, is sunny; and warm.",
    "short doc " * 30,
]


@pytest.fixture
def folders(tiny_model, tmp_path) -> dict[str, Path]:
    pylate = _pylate_folder(tiny_model, tmp_path)
    return {"pylate": pylate, "stanford": _stanford_folder(pylate, tmp_path)}


@pytest.mark.parametrize("layout", ["pylate", "stanford"])
def test_token_vectors_match_the_reference(folders, layout: str) -> None:
    engine = Engine(folders[layout])
    assert engine.supported_tasks == ("token_embed", "score")
    assert engine.embedding_dim == DIM
    for is_query, texts in ((True, QUERIES), (False, DOCUMENTS)):
        params = PoolingParams(input_type="query" if is_query else "document")
        outputs = engine.encode(texts, pooling_task="token_embed", pooling_params=params)
        for text, out in zip(texts, outputs, strict=True):
            reference = _reference(folders["pylate"], text, is_query)
            assert out.outputs.data.shape == reference.shape
            np.testing.assert_allclose(out.outputs.data, reference, atol=1e-5)
    query_out = engine.encode(QUERIES[:1], "token_embed", PoolingParams(input_type="query"))[0]
    assert query_out.outputs.data.shape == (QUERY_LEN, DIM)  # expansion tokens are kept


def test_truncate_prompt_tokens_shortens_queries_and_documents(folders) -> None:
    """A request's limit shortens the model's query and document lengths (as if the folder said
    so); a limit that leaves no text beside [CLS], the marker and [SEP] is refused."""
    engine = Engine(folders["pylate"])
    for is_query, text, limit in ((True, QUERIES[1], 6), (False, DOCUMENTS[2], 9)):
        params = PoolingParams(input_type="query" if is_query else "document", truncate_prompt_tokens=limit)
        (out,) = engine.encode([text], "token_embed", params)
        reference = _reference(folders["pylate"], text, is_query, length=limit)
        assert out.num_tokens == limit
        np.testing.assert_allclose(out.outputs.data, reference, atol=1e-5)
    with pytest.raises(InvalidInputError, match="must be at least 4") as refused:
        engine.encode(
            ["x y z"], "token_embed", PoolingParams(input_type="document", truncate_prompt_tokens=3)
        )
    assert refused.value.param == "truncate_prompt_tokens"


def test_a_pylate_folder_reads_its_own_lengths_not_the_saved_max_seq_length(folders) -> None:
    """PyLate saves ``max_seq_length = document_length - 1`` (what it tokenises to before the
    marker) and reads past it and the tokenizer's ``model_max_length``: documents run
    ``document_length`` tokens, which is the model's length."""
    folder = folders["pylate"]
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": DOC_LEN - 1}))
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(
        json.dumps(tokenizer_config | {"model_max_length": QUERY_LEN})
    )
    engine = Engine(folder)
    assert engine.max_model_len == DOC_LEN
    for params in (
        PoolingParams(input_type="document"),
        PoolingParams(input_type="document", truncate_prompt_tokens=DOC_LEN),
    ):
        (out,) = engine.encode(DOCUMENTS[2:], "token_embed", params)
        assert out.num_tokens == DOC_LEN
        np.testing.assert_allclose(out.outputs.data, _reference(folder, DOCUMENTS[2], False), atol=1e-5)


def test_the_skiplist_drops_document_rows_as_pylate_does(folders) -> None:
    """PyLate drops a document token whose id a skiplist word converts to: none for an empty
    skiplist, and [UNK] for a word that is not a token of the vocabulary."""
    folder = folders["pylate"]
    settings = folder / "config_sentence_transformers.json"
    text = "snowman ☃ here, there!"  # [CLS] [D] snow ##man [UNK] here , there ! [SEP]
    for skiplist, rows in (([], 10), (["!", "not-a-token"], 8), (None, 8)):
        settings.write_text(json.dumps(json.loads(settings.read_text()) | {"skiplist_words": skiplist}))
        (out,) = Engine(folder).encode([text], "token_embed", PoolingParams(input_type="document"))
        assert out.num_tokens == 10 and out.outputs.data.shape[0] == rows, skiplist


def test_maxsim_score_is_sum_of_best_matches(folders) -> None:
    engine = Engine(folders["pylate"])
    scores = [s.outputs.score for s in engine.score(QUERIES[0], DOCUMENTS)]
    q = _reference(folders["pylate"], QUERIES[0], True)
    expected = [float((q @ _reference(folders["pylate"], d, False).T).max(axis=1).sum()) for d in DOCUMENTS]
    np.testing.assert_allclose(scores, expected, atol=1e-4)


def test_embed_is_not_a_colbert_task(folders) -> None:
    from poolrag import UnsupportedTaskError

    with pytest.raises(UnsupportedTaskError):
        Engine(folders["pylate"]).embed(["x"])


def test_dimensions_cut_each_token_vector_before_normalising(folders) -> None:
    """As vLLM cuts a Matryoshka ColBERT model's token vectors (jina-colbert-v2 trains 128/96/64):
    the first ``dimensions`` components of each raw token vector, then L2 per token."""
    engine = Engine(folders["pylate"], hf_overrides={"is_matryoshka": True})
    raw = engine.encode(DOCUMENTS[:2], "token_embed", PoolingParams(normalize=False))
    cut = engine.encode(DOCUMENTS[:2], "token_embed", PoolingParams(dimensions=8))
    for whole, out in zip(raw, cut, strict=True):
        prefix = whole.outputs.data[:, :8]
        expected = prefix / np.linalg.norm(prefix, axis=1, keepdims=True)
        np.testing.assert_allclose(out.outputs.data, expected, rtol=0, atol=1e-6)
    unnormalised = engine.encode(DOCUMENTS[:1], "token_embed", PoolingParams(dimensions=8, normalize=False))
    np.testing.assert_array_equal(unnormalised[0].outputs.data, raw[0].outputs.data[:, :8])
    with pytest.raises(DimensionsError, match="not a Matryoshka model"):
        Engine(folders["pylate"]).encode(["x"], "token_embed", PoolingParams(dimensions=8))


def test_the_loaded_normalise_switch_is_token_embeds_default(folders) -> None:
    """vLLM fills token_embed's default from the pooler config, as embed's: a model loaded with
    normalisation off gives raw token vectors unless a request asks, and keys its outputs apart."""
    normalised = Engine(folders["pylate"])
    raw = Engine(folders["pylate"], pooler_config={"normalize": False})
    plain = raw.encode(DOCUMENTS[:1], "token_embed")[0].outputs.data
    asked = normalised.encode(DOCUMENTS[:1], "token_embed", PoolingParams(normalize=False))[0].outputs.data
    np.testing.assert_array_equal(plain, asked)
    assert not np.allclose(np.linalg.norm(plain, axis=1), 1.0)
    again = raw.encode(DOCUMENTS[:1], "token_embed", PoolingParams(normalize=True))[0].outputs.data
    np.testing.assert_allclose(np.linalg.norm(again, axis=1), 1.0, atol=1e-5)
    assert raw.facts.output_fingerprint != normalised.facts.output_fingerprint


def test_a_normalise_switch_that_changes_nothing_keeps_the_fingerprint(minilm_path) -> None:
    """Collections and caches key on the outputs' fingerprint: saying the default aloud
    (``{"normalize": true}``, as vLLM command lines do) must not orphan them."""
    assert (
        Engine(minilm_path, pooler_config={"normalize": True}).facts.output_fingerprint
        == Engine(minilm_path).facts.output_fingerprint
    )
