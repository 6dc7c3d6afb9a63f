"""Issue 30, item 0: "Models saved by today's sentence-transformers are refused."

``SentenceTransformer(...).save()`` with sentence-transformers 6.2 writes ``modules.json`` types such
as ``sentence_transformers.base.modules.transformer.Transformer``,
``sentence_transformers.sentence_transformer.modules.pooling.Pooling`` and
``sentence_transformers.base.modules.normalize.Normalize``; ``Engine(folder)`` answered
``ModelLoadError: sentence-transformers module '...Pooling' is not supported``. Every folder here is
made by saving a real ``SentenceTransformer`` / ``SparseEncoder`` / ``CrossEncoder`` with the pinned
version, so a future rename fails these tests instead of a user; the names 2.x-5.x wrote are read
by the same rule (the class name, what the module is).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from poolrag import Engine, PoolingParams
from poolrag.config.st_modules import NOT_SUPPORTED, SUPPORTED, StModule, st_module_role
from poolrag.errors import ModelLoadError
from poolrag.testing.tiny_models import (
    SENTENCES,
    build_encoder,
    build_splade,
    write_legacy_sentence_transformers_names,
    write_sentence_transformers,
)

# every spelling sentence-transformers 2.x-6.x (and PyLate) writes for the modules poolrag runs
SPELLINGS: dict[str, StModule] = {
    "sentence_transformers.models.Transformer": StModule.TRANSFORMER,
    "sentence_transformers.base.modules.transformer.Transformer": StModule.TRANSFORMER,
    "sentence_transformers.sparse_encoder.models.MLMTransformer": StModule.TRANSFORMER,
    "sentence_transformers.sparse_encoder.modules.mlm_transformer.MLMTransformer": StModule.TRANSFORMER,
    "sentence_transformers.models.Pooling": StModule.POOLING,
    "sentence_transformers.sentence_transformer.modules.pooling.Pooling": StModule.POOLING,
    "sentence_transformers.sentence_transformer.modules.Pooling": StModule.POOLING,
    "sentence_transformers.models.Dense": StModule.DENSE,
    "sentence_transformers.base.modules.dense.Dense": StModule.DENSE,
    "pylate.models.Dense.Dense": StModule.DENSE,
    "sentence_transformers.models.Normalize": StModule.NORMALIZE,
    "sentence_transformers.base.modules.normalize.Normalize": StModule.NORMALIZE,
    "sentence_transformers.sparse_encoder.models.SpladePooling": StModule.SPLADE_POOLING,
    "sentence_transformers.sparse_encoder.modules.splade_pooling.SpladePooling": StModule.SPLADE_POOLING,
    "sentence_transformers.models.Dropout": StModule.IDENTITY,
    "sentence_transformers.sentence_transformer.modules.dropout.Dropout": StModule.IDENTITY,
}


def _module_types(folder: Path) -> list[str]:
    return [m["type"] for m in json.loads((folder / "modules.json").read_text())]


@pytest.mark.parametrize("type_name", sorted(SPELLINGS))
def test_every_version_spelling_is_recognised_by_its_class(type_name: str) -> None:
    assert st_module_role(type_name, "modules.json") is SPELLINGS[type_name]


def test_the_table_covers_every_module_class_sentence_transformers_exports() -> None:
    """A module the pinned sentence-transformers adds is either run or refused by name, never
    reported as unknown."""
    from sentence_transformers.cross_encoder import modules as ce
    from sentence_transformers.multi_vector_encoder import modules as mv
    from sentence_transformers.sentence_transformer import modules as st
    from sentence_transformers.sparse_encoder import modules as se

    exported = {name for package in (st, se, ce, mv) for name in getattr(package, "__all__", ())}
    abstract = {"Module", "InputModule"}
    assert exported - abstract - set(SUPPORTED) - set(NOT_SUPPORTED) == set()


@pytest.mark.parametrize(
    ("type_name", "message"),
    [
        ("sentence_transformers.sentence_transformer.modules.static_embedding.StaticEmbedding", "static"),
        ("sentence_transformers.base.modules.router.Router", "queries and documents"),
        ("sentence_transformers.models.Asym", "queries and documents"),
        ("sentence_transformers.sparse_encoder.models.SparseStaticEmbedding", "inference-free"),
        (
            "sentence_transformers.sentence_transformer.modules.bespoke.Bespoke",
            "unknown sentence-transformers module",
        ),
        ("custom_st.Transformer", "the folder's own code"),
    ],
)
def test_modules_poolrag_cannot_run_are_refused_in_one_line(type_name: str, message: str) -> None:
    with pytest.raises(ModelLoadError, match=message) as caught:
        st_module_role(type_name, "modules.json")
    assert "\n" not in str(caught.value) and type_name in str(caught.value)


@pytest.fixture(scope="module")
def saved_embedder(tmp_path_factory, minilm_path: Path) -> Path:
    folder = build_encoder(tmp_path_factory.mktemp("st6"), "bert", minilm_path, seed=3)
    return write_sentence_transformers(folder, pooling="mean", dense_out=12, normalize=True)


def test_a_sentence_transformer_saved_by_the_pinned_version_loads_and_matches(saved_embedder: Path) -> None:
    from sentence_transformers import SentenceTransformer

    assert _module_types(saved_embedder) == [
        "sentence_transformers.base.modules.transformer.Transformer",
        "sentence_transformers.sentence_transformer.modules.pooling.Pooling",
        "sentence_transformers.base.modules.dense.Dense",
        "sentence_transformers.base.modules.normalize.Normalize",
    ]
    reference = SentenceTransformer(str(saved_embedder), device="cpu").encode(SENTENCES)
    ours = Engine(saved_embedder).embed_array(SENTENCES)
    assert ours.shape == (len(SENTENCES), 12)
    np.testing.assert_allclose(ours, reference, atol=1e-5)


def test_the_same_folder_with_the_names_older_versions_wrote_matches_too(
    saved_embedder: Path, tmp_path
) -> None:
    from sentence_transformers import SentenceTransformer

    folder = write_legacy_sentence_transformers_names(shutil.copytree(saved_embedder, tmp_path / "old"))
    assert _module_types(folder)[1] == "sentence_transformers.models.Pooling"
    reference = SentenceTransformer(str(saved_embedder), device="cpu").encode(SENTENCES)
    np.testing.assert_allclose(Engine(folder).embed_array(SENTENCES), reference, atol=1e-5)


def test_a_saved_cross_encoder_keeps_its_activation(tmp_path, minilm_path: Path) -> None:
    """sentence-transformers 6 writes a CrossEncoder's ``activation_fn`` to
    config_sentence_transformers.json; an Identity there means raw logits, not sigmoid."""
    from sentence_transformers import CrossEncoder

    raw = build_encoder(tmp_path / "raw", "bert", minilm_path, head="sequence", num_labels=1, seed=5)
    CrossEncoder(str(raw), device="cpu", activation_fn=torch.nn.Identity()).save(str(tmp_path / "ce"))
    folder = tmp_path / "ce"
    assert _module_types(folder) == ["sentence_transformers.base.modules.transformer.Transformer"]
    query, docs = "what is pooling", ["Pooling turns tokens into one vector.", "Hi", "Rerankers score pairs."]
    reference = CrossEncoder(str(folder), device="cpu").predict([(query, d) for d in docs])
    assert np.all(np.abs(reference - 0.5) > 0.1)  # raw logits of a tiny head (near 0): a sigmoid gives ~0.5
    ours = [o.outputs.score for o in Engine(folder).score(query, docs)]
    np.testing.assert_allclose(ours, reference, atol=1e-5)


def test_a_cross_encoder_saved_before_sentence_transformers_4_keeps_its_activation(
    tmp_path, minilm_path: Path
) -> None:
    """sentence-transformers < 4 (most hub cross-encoders, ms-marco's among them) saved the activation
    as config.json's ``sbert_ce_default_activation_function``; today's version still reads it."""
    from sentence_transformers import CrossEncoder
    from transformers import AutoConfig

    folder = build_encoder(tmp_path / "old-ce", "bert", minilm_path, head="sequence", num_labels=1, seed=5)
    config = AutoConfig.from_pretrained(folder)  # what CrossEncoder.save did before 4.0
    config.sbert_ce_default_activation_function = "torch.nn.modules.linear.Identity"
    config.save_pretrained(folder)
    query, docs = "what is pooling", ["Pooling turns tokens into one vector.", "Hi", "Rerankers score pairs."]
    reference = CrossEncoder(str(folder), device="cpu").predict([(query, d) for d in docs])
    assert np.all(np.abs(reference - 0.5) > 0.1)  # raw logits, not a sigmoid's ~0.5
    ours = [o.outputs.score for o in Engine(folder).score(query, docs)]
    np.testing.assert_allclose(ours, reference, atol=1e-5)


def test_a_cross_encoder_saved_with_tanh_scores_through_tanh(tmp_path, minilm_path: Path) -> None:
    """A CrossEncoder saved with Tanh: its scores were the sigmoid's here (0.503 where
    sentence-transformers gives 0.012)."""
    from sentence_transformers import CrossEncoder

    raw = build_encoder(tmp_path / "raw", "bert", minilm_path, head="sequence", num_labels=1, seed=5)
    CrossEncoder(str(raw), device="cpu", activation_fn=torch.nn.Tanh()).save(str(tmp_path / "ce"))
    query, docs = "what is pooling", ["Pooling turns tokens into one vector.", "Hi"]
    reference = CrossEncoder(str(tmp_path / "ce"), device="cpu").predict([(query, d) for d in docs])
    ours = [o.outputs.score for o in Engine(tmp_path / "ce").score(query, docs)]
    np.testing.assert_allclose(ours, reference, atol=1e-5)


def test_a_cross_encoder_activation_poolrag_does_not_apply_is_named_in_a_warning(
    tmp_path, minilm_path: Path, caplog
) -> None:
    """A CrossEncoder saved with an activation poolrag has no head for (ReLU): the load says which
    activation its scores get instead; the raw logits are at hand."""
    from sentence_transformers import CrossEncoder

    raw = build_encoder(tmp_path / "raw", "bert", minilm_path, head="sequence", num_labels=1, seed=5)
    CrossEncoder(str(raw), device="cpu", activation_fn=torch.nn.ReLU()).save(str(tmp_path / "ce"))
    with caplog.at_level("WARNING", logger="poolrag.core.task_heads"):
        engine = Engine(tmp_path / "ce")
    assert "names the cross-encoder activation torch.nn.modules.activation.ReLU" in caplog.text
    assert "sigmoid of the logits" in caplog.text
    query, docs = "what is pooling", ["Pooling turns tokens into one vector.", "Hi"]
    logits = CrossEncoder(str(tmp_path / "ce"), device="cpu", activation_fn=torch.nn.Identity()).predict(
        [(query, d) for d in docs]
    )
    raw_scores = engine.score(query, docs, PoolingParams(use_activation=False))
    np.testing.assert_allclose([o.outputs.score for o in raw_scores], logits, atol=1e-5)


def test_a_saved_sparse_encoder_loads_with_the_pinned_names(tmp_path, minilm_path: Path) -> None:
    from sentence_transformers import SparseEncoder

    folder = build_splade(tmp_path, minilm_path)
    assert _module_types(folder) == [
        "sentence_transformers.base.modules.transformer.Transformer",
        "sentence_transformers.sparse_encoder.modules.splade_pooling.SpladePooling",
    ]
    reference = SparseEncoder(str(folder), device="cpu").encode(SENTENCES[:3], convert_to_tensor=True)
    vectors = Engine(folder).sparse_embed(SENTENCES[:3])
    for vector, expected in zip(vectors, reference.to_dense().numpy(), strict=True):
        dense = np.zeros_like(expected)
        dense[np.asarray(vector.indices)] = vector.values
        np.testing.assert_allclose(dense, expected, atol=1e-5)


def test_a_saved_static_embedding_model_is_refused_naming_the_module(tmp_path, minilm_path: Path) -> None:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(minilm_path / "tokenizer.json"))
    SentenceTransformer(modules=[StaticEmbedding(tokenizer, embedding_dim=8)], device="cpu").save(
        str(tmp_path / "static")
    )
    with pytest.raises(ModelLoadError, match=r"StaticEmbedding'.*static") as caught:
        Engine(tmp_path / "static")
    assert "\n" not in str(caught.value)


def test_a_folder_that_lowercases_its_texts_is_read_lowercased(tmp_path, minilm_path: Path) -> None:
    """``"do_lower_case": true`` in sentence_bert_config.json (as sentence-transformers 2.x-5.x
    saved it; 6.x puts the lowercasing in the tokenizer it saves): every text is lowercased before
    a cased tokenizer reads it. It was ignored here (0.9 apart on "Paris Is The Capital")."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Pooling, Transformer

    cased = build_encoder(tmp_path / "cased", "bert", minilm_path, seed=4)
    tokenizer_json = json.loads((cased / "tokenizer.json").read_text())
    tokenizer_json["normalizer"]["lowercase"] = False
    (cased / "tokenizer.json").write_text(json.dumps(tokenizer_json))
    tokenizer_config = json.loads((cased / "tokenizer_config.json").read_text())
    (cased / "tokenizer_config.json").write_text(json.dumps(tokenizer_config | {"do_lower_case": False}))
    folder = tmp_path / "st"
    modules = [Transformer(str(cased)), Pooling(32, "mean")]
    SentenceTransformer(modules=modules, device="cpu").save(str(folder))
    texts = ["Paris Is The Capital", "paris is the capital", "A MiXeD-case Query"]
    as_written = Engine(folder).embed_array(texts)
    assert not np.allclose(as_written[0], as_written[1], atol=1e-3)  # the tokenizer is cased
    config = json.loads((folder / "sentence_bert_config.json").read_text())
    (folder / "sentence_bert_config.json").write_text(json.dumps(config | {"do_lower_case": True}))
    engine = Engine(folder)
    reference = SentenceTransformer(str(folder), device="cpu").encode(texts)
    np.testing.assert_allclose(engine.embed_array(texts), reference, atol=1e-5)
    assert engine.tokenize("Paris") == engine.tokenize("paris")


def test_a_sparse_encoder_keeps_as_many_weights_as_its_folder_says(tmp_path, minilm_path: Path) -> None:
    """``max_active_dims`` saved with a SparseEncoder is what its vectors keep when a call does not
    say (it was ignored: 28,280 weights where sentence-transformers keeps 5); a call still chooses."""
    from sentence_transformers import SparseEncoder

    SparseEncoder(str(build_splade(tmp_path, minilm_path)), max_active_dims=5).save(str(tmp_path / "five"))
    reference = SparseEncoder(str(tmp_path / "five"), device="cpu")
    engine = Engine(tmp_path / "five")
    expected = reference.encode(SENTENCES[:3], convert_to_tensor=True).to_dense().numpy()
    for vector, row in zip(engine.sparse_embed(SENTENCES[:3]), expected, strict=True):
        assert len(vector.indices) == 5
        dense = np.zeros_like(row)
        dense[np.asarray(vector.indices)] = vector.values
        np.testing.assert_allclose(dense, row, atol=1e-5)
    wider = engine.sparse_embed(SENTENCES[:1], PoolingParams(max_active_dims=9))[0]
    assert len(wider.indices) == 9


def test_a_sentence_transformer_saved_with_truncate_dim_gives_vectors_of_that_size(
    tmp_path, saved_embedder: Path
) -> None:
    """``truncate_dim`` in config_sentence_transformers.json is the size sentence-transformers'
    encode returns (it was ignored: 12 where it gives 8); the vectors are cut, then normalised as
    the folder normalises (sentence-transformers' ``normalize_embeddings=True``); a call may ask
    for a smaller size."""
    from sentence_transformers import SentenceTransformer

    SentenceTransformer(str(saved_embedder), device="cpu", truncate_dim=8).save(str(tmp_path / "cut"))
    reference = SentenceTransformer(str(tmp_path / "cut"), device="cpu")
    expected = reference.encode(SENTENCES, normalize_embeddings=True)
    assert expected.shape == (len(SENTENCES), 8)
    engine = Engine(tmp_path / "cut")
    np.testing.assert_allclose(engine.embed_array(SENTENCES), expected, atol=1e-5)
    assert engine.embed_array(SENTENCES[:1], PoolingParams(dimensions=4)).shape == (1, 4)


def _save(folder: Path, backbone: Path, *after_transformer: torch.nn.Module) -> Path:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Transformer

    SentenceTransformer(modules=[Transformer(str(backbone)), *after_transformer], device="cpu").save(
        str(folder)
    )
    return folder


def _dense(in_features: int, out_features: int, **options: object) -> torch.nn.Module:
    from sentence_transformers.sentence_transformer.modules import Dense

    torch.manual_seed(7)
    dense = Dense(in_features, out_features, activation_function=torch.nn.Tanh(), **options)
    with torch.no_grad():
        dense.linear.bias.normal_(0.0, 0.1)
    return dense


def test_a_dense_after_a_normalize_projects_the_unit_vector(tmp_path, minilm_path: Path) -> None:
    """[Pooling, Normalize, Dense]: sentence-transformers projects the unit vector and returns the
    projection as it is; poolrag projected the raw pooled vector and normalised the result (0.26
    apart, norms 1.0 where sentence-transformers gives 0.59)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling

    backbone = build_encoder(tmp_path / "bert", "bert", minilm_path, seed=5)
    folder = _save(tmp_path / "st", backbone, Pooling(32, "mean"), Normalize(), _dense(32, 16))
    reference = SentenceTransformer(str(folder), device="cpu").encode(SENTENCES)
    assert not np.allclose(np.linalg.norm(reference, axis=1), 1.0, atol=1e-3)
    np.testing.assert_allclose(Engine(folder).embed_array(SENTENCES), reference, atol=1e-5)


def _modules_after_transformer(shape: str) -> list[torch.nn.Module]:
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling

    return {
        # a per-token projection before pooling (poolrag applied it after pooling)
        "dense-on-tokens": lambda: [_dense(32, 16, module_input_name="token_embeddings"), Pooling(16)],
        # the projection plus its input (poolrag dropped the residual)
        "dense-residual": lambda: [Pooling(32), _dense(32, 32, use_residual=True)],
        # a projection stored under another key leaves the pooled vector as it is
        "dense-to-other-key": lambda: [Pooling(32), _dense(32, 16, module_output_name="projected")],
        # token vectors normalised, the pooled one not (poolrag normalised the pooled vector)
        "normalize-on-tokens": lambda: [Pooling(32), Normalize(module_input_name="token_embeddings")],
    }[shape]()


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        (
            "dense-on-tokens",
            r"1_Dense: a Dense module on another vector than the pooled one "
            r"\(module_input_name='token_embeddings'",
        ),
        ("dense-residual", r"2_Dense: a Dense module with use_residual=true is not supported"),
        (
            "dense-to-other-key",
            r"2_Dense: a Dense module on another vector than the pooled one "
            r"\(module_output_name='projected'\)",
        ),
        ("normalize-on-tokens", r"2_Normalize: a Normalize module on another vector than the pooled one"),
    ],
)
def test_dense_and_normalize_settings_poolrag_does_not_run_are_refused(
    tmp_path, minilm_path: Path, shape: str, message: str
) -> None:
    """sentence-transformers 5+ saves where a Dense / Normalize reads and writes
    (``module_input_name`` / ``module_output_name``) and Dense's ``use_residual``; poolrag ignored
    them and returned other vectors than sentence-transformers, silently. Now a one-line error."""
    backbone = build_encoder(tmp_path / "bert", "bert", minilm_path, seed=5)
    folder = _save(tmp_path / "st", backbone, *_modules_after_transformer(shape))
    with pytest.raises(ModelLoadError, match=message) as caught:
        Engine(folder)
    assert "\n" not in str(caught.value)


def test_a_saved_multi_vector_encoder_is_refused_by_name(tmp_path, minilm_path: Path) -> None:
    """sentence-transformers 6's MultiVectorEncoder saves [Transformer, Dense, Normalize] acting on
    ``token_embeddings``; poolrag loaded it as a one-vector embedder (token_embed gave 32-wide
    tokens without the Dense, where sentence-transformers gives 16-wide): now refused, by name."""
    from sentence_transformers import MultiVectorEncoder
    from sentence_transformers.sentence_transformer.modules import Normalize, Transformer

    backbone = build_encoder(tmp_path / "bert", "bert", minilm_path, seed=5)
    modules = [
        Transformer(str(backbone)),
        _dense(32, 16, module_input_name="token_embeddings"),
        Normalize(module_input_name="token_embeddings"),
    ]
    MultiVectorEncoder(modules=modules, device="cpu").save(str(tmp_path / "mve"))
    with pytest.raises(ModelLoadError, match=r"MultiVectorEncoder is not supported") as caught:
        Engine(tmp_path / "mve")
    assert "\n" not in str(caught.value)


def test_a_default_prompt_name_the_folder_does_not_hold_is_refused(tmp_path, saved_embedder: Path) -> None:
    """sentence-transformers refuses a folder whose ``default_prompt_name`` names no prompt of its
    own; poolrag read it as no prompt at all and embedded every text without one."""
    from sentence_transformers import SentenceTransformer

    folder = shutil.copytree(saved_embedder, tmp_path / "st")
    settings = folder / "config_sentence_transformers.json"
    config = json.loads(settings.read_text())
    config |= {"prompts": {"query": "query: "}, "default_prompt_name": "classification"}
    settings.write_text(json.dumps(config))
    with pytest.raises(ValueError, match="classification"):
        SentenceTransformer(str(folder), device="cpu")
    with pytest.raises(ModelLoadError, match=r"default_prompt_name 'classification' is not one of") as caught:
        Engine(folder)
    assert "\n" not in str(caught.value)


_NO_FLAG_SET = {f"pooling_mode_{m}": False for m in ("cls_token", "mean_tokens", "max_tokens", "lasttoken")}


@pytest.mark.parametrize(
    "pooling_config",
    [
        # 2.x-5.x flags, none set: sentence-transformers pools by mean (its default)
        {"word_embedding_dimension": 32, **_NO_FLAG_SET},
        {"word_embedding_dimension": 32},
        # 6.x's pooling_mode wins over stale flags (sentence-transformers drops them)
        {"embedding_dimension": 32, "pooling_mode": "mean", "pooling_mode_weightedmean_tokens": True},
    ],
    ids=["no-flag-set", "no-mode-key", "mode-beside-stale-flags"],
)
def test_a_pooling_config_is_read_as_sentence_transformers_reads_it(
    tmp_path, minilm_path: Path, pooling_config: dict[str, object]
) -> None:
    """poolrag refused these Pooling configs ("expected exactly one pooling mode, found none";
    "pooling mode 'pooling_mode_weightedmean_tokens' is not supported") where
    sentence-transformers 6.2 loads them and pools by mean."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    backbone = build_encoder(tmp_path / "bert", "bert", minilm_path, seed=5)
    folder = _save(tmp_path / "st", backbone, Pooling(32, "cls"))
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling_config))
    reference = SentenceTransformer(str(folder), device="cpu").encode(SENTENCES)
    mean = SentenceTransformer(str(_save(tmp_path / "mean", backbone, Pooling(32, "mean"))), device="cpu")
    np.testing.assert_allclose(reference, mean.encode(SENTENCES), atol=1e-6)
    np.testing.assert_allclose(Engine(folder).embed_array(SENTENCES), reference, atol=1e-5)


@pytest.mark.parametrize(
    ("pooling_config", "pooling_type"),
    [
        # 2.x-5.x flags for the position-weighted mean (SGPT) and sum / sqrt(length)
        ({"word_embedding_dimension": 32, "pooling_mode_weightedmean_tokens": True}, "WEIGHTEDMEAN"),
        ({"word_embedding_dimension": 32, "pooling_mode_mean_sqrt_len_tokens": True}, "MEAN_SQRT_LEN"),
        # INSTRUCTOR's 2.x config: mean over the text, its prompt attended to but not pooled
        ({"word_embedding_dimension": 32, "pooling_mode_mean_tokens": True, "include_prompt": False}, "MEAN"),
    ],
    ids=["legacy-weightedmean", "legacy-mean-sqrt-len", "legacy-include-prompt-false"],
)
def test_the_pooling_modes_once_refused_are_read_and_run_as_sentence_transformers_does(
    tmp_path, minilm_path: Path, pooling_config: dict[str, object], pooling_type: str
) -> None:
    """poolrag refused these Pooling configs at load ("pooling mode 'pooling_mode_weightedmean_tokens'
    is not supported", "pooling with include_prompt=false is not supported"); sentence-transformers
    6.2 loads them, and with a prompt poolrag's vectors equal its."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    backbone = build_encoder(tmp_path / "bert", "bert", minilm_path, seed=5)
    folder = _save(tmp_path / "st", backbone, Pooling(32, "cls"))
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling_config))
    engine = Engine(folder)
    assert engine.pooler_config.pooling_type == pooling_type
    reference = SentenceTransformer(str(folder), device="cpu").encode(SENTENCES, prompt="query: ")
    np.testing.assert_allclose(
        engine.embed_array(SENTENCES, PoolingParams(prompt="query: ")), reference, atol=1e-5
    )


def test_an_include_prompt_that_is_not_a_boolean_is_refused(tmp_path, minilm_path: Path) -> None:
    from sentence_transformers.sentence_transformer.modules import Pooling

    folder = _save(
        tmp_path / "st", build_encoder(tmp_path / "bert", "bert", minilm_path), Pooling(32, "mean")
    )
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"embedding_dimension": 32, "include_prompt": "no"})
    )
    with pytest.raises(ModelLoadError, match=r"include_prompt must be true or false, got 'no'"):
        Engine(folder)
