"""`embed` equals sentence-transformers' `encode` for every encoder architecture and ST layout."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from poolrag import Engine, InvalidInputError, ModelLoadError, PoolingParams
from poolrag.config.st_activations import DENSE_ACTIVATIONS
from poolrag.testing.tiny_models import ENCODER_ARCHS, SENTENCES, write_sentence_transformers


def _st_folder(tiny_model, tmp_path: Path, arch: str, **st_options: object) -> Path:
    folder = tmp_path / arch
    shutil.copytree(tiny_model(arch), folder)
    return write_sentence_transformers(folder, **st_options)


@pytest.mark.parametrize("arch", ENCODER_ARCHS)
@pytest.mark.parametrize("pooling", ["mean", "cls", "lasttoken"])
def test_pooling_modes_match_sentence_transformers(tiny_model, tmp_path, arch: str, pooling: str) -> None:
    folder = _st_folder(tiny_model, tmp_path, arch, pooling=pooling)
    reference = SentenceTransformer(str(folder), device="cpu").encode(SENTENCES, batch_size=2)
    ours = Engine(folder).embed_array(SENTENCES)
    np.testing.assert_allclose(ours, reference, atol=1e-5, rtol=0)


@pytest.mark.parametrize("arch", ["bert", "roberta", "modernbert"])
def test_dense_and_normalize_match_sentence_transformers(tiny_model, tmp_path, arch: str) -> None:
    folder = _st_folder(tiny_model, tmp_path, arch, pooling="mean", dense_out=24, normalize=True)
    reference = SentenceTransformer(str(folder), device="cpu").encode(SENTENCES)
    engine = Engine(folder)
    ours = engine.embed_array(SENTENCES)
    assert engine.embedding_dim == 24
    np.testing.assert_allclose(ours, reference, atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-6)


@pytest.mark.parametrize("activation", DENSE_ACTIVATIONS)
def test_every_dense_activation_poolrag_builds_matches_sentence_transformers(
    tiny_model, tmp_path, activation: str
) -> None:
    folder = _st_folder(tiny_model, tmp_path, "bert", dense_out=24, dense_activation=f"torch.nn.{activation}")
    reference = SentenceTransformer(str(folder), device="cpu").encode(SENTENCES)
    np.testing.assert_allclose(Engine(folder).embed_array(SENTENCES), reference, atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    "path", ["torch.nn.modules.module.OrderedDict", "torch.nn.Transformer", "os.system", "builtins.eval"]
)
def test_a_dense_activation_outside_the_list_is_refused_not_imported(tiny_model, tmp_path, path: str) -> None:
    """The folder's config names a class path; it is matched against torch.nn activations, never
    imported, so a file cannot choose code."""
    folder = _st_folder(tiny_model, tmp_path, "bert", dense_out=24)
    (config_file,) = folder.glob("*Dense/config.json")
    config = json.loads(config_file.read_text())
    config["activation_function"] = path
    config_file.write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match=f"projection activation '{re.escape(path)}' is not one"):
        Engine(folder)


def test_folder_without_normalize_module_is_not_normalised(tiny_model, tmp_path) -> None:
    folder = _st_folder(tiny_model, tmp_path, "bert", pooling="mean")
    vectors = Engine(folder).embed_array(SENTENCES)
    assert not np.allclose(np.linalg.norm(vectors, axis=1), 1.0)


def test_matryoshka_truncation_matches_sentence_transformers_truncate_dim(tiny_model, tmp_path) -> None:
    folder = _st_folder(tiny_model, tmp_path, "bert", pooling="mean", dense_out=24, normalize=True)
    st = SentenceTransformer(str(folder), device="cpu", truncate_dim=8)
    reference = st.encode(SENTENCES, normalize_embeddings=True)
    engine = Engine(folder, hf_overrides={"is_matryoshka": True})
    ours = engine.embed_array(SENTENCES, PoolingParams(dimensions=8))
    assert ours.shape == (len(SENTENCES), 8)
    np.testing.assert_allclose(ours, reference, atol=1e-5, rtol=0)


def test_prompts_from_the_folder_are_applied_per_input_type(tiny_model, tmp_path) -> None:
    prompts = {"query": "query: ", "document": "passage: "}
    folder = _st_folder(tiny_model, tmp_path, "bert", pooling="mean", prompts=prompts)
    st = SentenceTransformer(str(folder), device="cpu")
    engine = Engine(folder)
    for input_type, name in (("query", "query"), ("document", "document")):
        reference = st.encode(SENTENCES, prompt_name=name)
        ours = engine.embed_array(SENTENCES, PoolingParams(input_type=input_type))
        np.testing.assert_allclose(ours, reference, atol=1e-5, rtol=0)
    plain = engine.embed_array(SENTENCES)
    np.testing.assert_allclose(plain, st.encode(SENTENCES), atol=1e-5, rtol=0)
    explicit = engine.embed_array(SENTENCES, PoolingParams(prompt="Represent this: "))
    np.testing.assert_allclose(explicit, st.encode(SENTENCES, prompt="Represent this: "), atol=1e-5, rtol=0)


def test_a_prompt_named_by_prompt_name_matches_sentence_transformers(tiny_model, tmp_path) -> None:
    prompts = {"query": "query: ", "classification": "classify: ", "clustering": "cluster: "}
    folder = _st_folder(tiny_model, tmp_path, "bert", pooling="mean", prompts=prompts)
    st = SentenceTransformer(str(folder), device="cpu")
    engine = Engine(folder)
    assert set(engine.facts.prompt_names) == set(st.prompts)  # sentence-transformers adds empty ones
    for name in ("classification", "clustering"):
        ours = engine.embed_array(SENTENCES, PoolingParams(prompt_name=name))
        np.testing.assert_allclose(ours, st.encode(SENTENCES, prompt_name=name), atol=1e-5, rtol=0)
    # a name the folder lacks is refused, listing the names it has; a name and a text are one too many
    with pytest.raises(InvalidInputError, match=r"'summary' is not one of this model's prompts \(.*'cluster"):
        engine.embed_array(SENTENCES, PoolingParams(prompt_name="summary"))
    with pytest.raises(InvalidInputError, match="prompt or prompt_name, not both"):
        PoolingParams(prompt="x: ", prompt_name="query")


def test_prompt_name_on_a_folder_without_prompts_says_it_has_none(tiny_model) -> None:
    engine = Engine(tiny_model("bert"))  # a bare transformers folder: no sentence-transformers config
    assert engine.facts.prompt_names == ()
    with pytest.raises(InvalidInputError, match="its folder names none"):
        engine.embed(SENTENCES, PoolingParams(prompt_name="query"))


def test_bare_encoder_folder_defaults_to_cls_and_normalises(tiny_model) -> None:
    """Without sentence-transformers files the engine pools [CLS] and normalises, as vLLM does."""
    import torch
    import transformers

    folder = tiny_model("bert")
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModel.from_pretrained(folder).eval()
    with torch.no_grad():
        batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
        cls = model(**batch).last_hidden_state[:, 0]
    reference = torch.nn.functional.normalize(cls, dim=-1).numpy()
    np.testing.assert_allclose(Engine(folder).embed_array(SENTENCES), reference, atol=1e-5, rtol=0)


def test_outputs_keep_input_order_and_duplicates_share_results(tiny_model, tmp_path) -> None:
    folder = _st_folder(tiny_model, tmp_path, "bert", pooling="mean")
    engine = Engine(folder, max_batch_tokens=64)  # many small batches
    outputs = engine.embed(SENTENCES)
    single = [engine.embed(s)[0].outputs.embedding for s in SENTENCES]
    for out, alone in zip(outputs, single, strict=True):
        np.testing.assert_allclose(out.outputs.embedding, alone, atol=1e-5)
    assert outputs[1].prompt_token_ids == outputs[4].prompt_token_ids
    assert outputs[1].prompt == "Hi"
    assert outputs[0].num_tokens == len(engine.tokenize(SENTENCES[0]))
