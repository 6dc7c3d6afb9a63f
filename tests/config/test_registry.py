"""docs/models.md is the registry's own output, and every registry row is what the engine does.

Each row is checked by loading a tiny model of that row's family: the kind, tasks, score kind and
default pooling the engine reports must be the row's, so neither the page nor the table can drift.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import transformers
from decoders.decoder_remote_code import llama_bidirectional_reranker, qwen2_reward_model
from decoders.tiny_decoders import build, build_tokenizer, tiny_config
from models_doc import README_END, README_START, REGENERATE, markdown
from safetensors.torch import load_file, save_file

from poolrag import Engine, PoolingParams
from poolrag.config.model_spec import load_model_spec
from poolrag.config.registry import (
    ARCHITECTURES,
    ENTRIES,
    KINDS,
    NOT_YET_IMPLEMENTED,
    Entry,
    ModelKind,
    Role,
    backbone_names,
    decoder_model_types,
    default_pooling,
    lookup_architecture,
    remote_classes,
)
from poolrag.core.recipes import RECIPES, encoder_network
from poolrag.errors import ModelLoadError
from poolrag.loading.native_loader import unsupported_reason
from poolrag.loading.placement import Placement
from poolrag.testing import engine_internals as internals
from poolrag.testing.tiny_models import build_bge_m3, build_clip, build_colpali, build_splade, copy_tokenizer

DOC = Path(__file__).resolve().parents[2] / "docs" / "models.md"


def test_models_page_is_generated_from_the_registry() -> None:
    assert DOC.read_text(encoding="utf-8") == markdown(), f"docs/models.md is stale; run `{REGENERATE}`"


@pytest.mark.parametrize(
    ("name", "role"),
    [
        ("HF_ColBERT", Role.COLBERT),
        ("BertForSequenceClassification", Role.SEQUENCE_HEAD),
        ("Qwen2ForRewardModel", Role.REWARD_HEAD),
        ("Qwen2ForProcessRewardModel", Role.PROCESS_REWARD_HEAD),
        ("BertForTokenClassification", Role.TOKEN_HEAD),
        ("Qwen3ForCausalLM", Role.LM_HEAD),
        ("GPT2LMHeadModel", Role.LM_HEAD),
        ("BertModel", Role.BACKBONE),
        ("BertForMaskedLM", Role.BACKBONE),
        ("XLMRobertaModel", Role.BACKBONE),
        ("Qwen3Model", Role.BACKBONE),
        ("MistralModel", Role.BACKBONE),
        ("ModernBertForMaskedLM", Role.BACKBONE),
        ("BertForPreTraining", Role.BACKBONE),
    ],
)
def test_lookup_architecture(name: str, role: Role) -> None:
    assert lookup_architecture(name) is role


def test_every_registered_name_and_pattern_is_accepted() -> None:
    for pattern in ARCHITECTURES:
        for name in pattern.names:
            assert lookup_architecture(name) is pattern.role, name
        for suffix in pattern.suffixes:
            assert lookup_architecture(f"Some{suffix}") is pattern.role, suffix
    names = backbone_names()
    assert {"BertModel", "XLMRobertaModel", "Qwen3Model", "MistralModel", "BertForMaskedLM"} <= names
    for name in names - NOT_YET_IMPLEMENTED.keys():  # any other base model transformers has is a backbone
        assert lookup_architecture(name) in set(Role), name


@pytest.mark.parametrize("name", ["NoSuchArchitectureModel", "NewModel", "T5ForConditionalGeneration"])
def test_unknown_names_are_refused_with_what_is_supported(name: str) -> None:
    with pytest.raises(ModelLoadError) as error:
        lookup_architecture(name)
    message = str(error.value)
    assert f"unknown architecture {name!r}" in message
    assert "*ForSequenceClassification" in message and "`HF_ColBERT`" in message and "BertModel" in message


def test_names_not_implemented_yet_are_refused_by_name() -> None:
    for name, reason in NOT_YET_IMPLEMENTED.items():
        with pytest.raises(ModelLoadError, match="not implemented in poolrag yet") as error:
            lookup_architecture(name)
        assert reason in str(error.value)
        assert not any(p.matches(name) and name in p.names for p in ARCHITECTURES), name


def test_a_funnel_base_model_is_refused_at_load(tmp_path: Path, minilm_path: Path) -> None:
    """FunnelBaseModel is in transformers' base-model table, but its blocks pool the sequence down:
    it loaded, then every call failed with an IndexError from the pooling (39 tokens, 20 rows)."""
    from poolrag.testing.tiny_models import copy_tokenizer

    config = transformers.FunnelConfig(
        vocab_size=30522, block_sizes=[1, 1], d_model=32, n_head=2, d_head=16, d_inner=37, pad_token_id=0
    )
    transformers.FunnelBaseModel(config).save_pretrained(tmp_path)
    copy_tokenizer(minilm_path, tmp_path)
    with pytest.raises(
        ModelLoadError, match="'FunnelBaseModel' is not implemented in poolrag yet: its hidden"
    ):
        Engine(tmp_path)


def test_a_name_not_implemented_yet_wins_over_its_suffix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(NOT_YET_IMPLEMENTED, "FancyForSequenceClassification", "a fancy head")
    with pytest.raises(ModelLoadError, match="not implemented in poolrag yet: a fancy head"):
        lookup_architecture("FancyForSequenceClassification")
    with pytest.raises(ModelLoadError, match="trust_remote_code=True"):
        lookup_architecture("FancyForSequenceClassification", frozenset({"FancyForSequenceClassification"}))
    provided = frozenset({"FancyForSequenceClassification"})  # its own code, trusted: runs that
    assert lookup_architecture("FancyForSequenceClassification", provided, True) is Role.SEQUENCE_HEAD


def test_remote_code_may_bring_its_own_architecture() -> None:
    provided = remote_classes(
        {"AutoConfig": "configuration_x.XConfig", "AutoModel": "org/repo--modeling_x.NewModel"}
    )
    assert provided == {"XConfig", "NewModel"}
    assert lookup_architecture("NewModel", provided, remote_code=True) is Role.BACKBONE
    with pytest.raises(ModelLoadError, match="trust_remote_code=True"):
        lookup_architecture("NewModel", provided, remote_code=False)
    reward = remote_classes({"AutoModel": "modeling.Qwen2ForRewardModel"})
    assert lookup_architecture("Qwen2ForRewardModel", reward, remote_code=True) is Role.REWARD_HEAD


@pytest.mark.parametrize("name", ["NoSuchArchitectureModel", "T5ForConditionalGeneration"])
def test_an_unknown_override_is_refused_before_loading(tiny_model: Callable[..., Path], name: str) -> None:
    with pytest.raises(ModelLoadError, match=f"unknown architecture {name!r}"):
        Engine(tiny_model("bert"), hf_overrides={"architectures": [name]})


def test_name_patterns_are_disjoint() -> None:
    """lookup_architecture takes the first match: no name may be claimed by two patterns."""
    suffixes = [s for p in ARCHITECTURES for s in p.suffixes]
    names = [n for p in ARCHITECTURES for n in p.names]
    assert not [(a, b) for a in suffixes for b in suffixes if a != b and a.endswith(b)]
    assert not [n for n in names if n.endswith(tuple(suffixes))]


def test_decoders_are_told_from_transformers_tables_not_a_hand_list() -> None:
    """Every decoder family poolrag has parity tests for (and those the docs name) is a causal LM of
    transformers' own; the encoders, which have a causal-LM class too (``BertLMHeadModel``), and the
    encoder-decoders, whose decoders are causal, are not."""
    decoders = decoder_model_types()
    tested = {"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "gemma3_text", "gpt2"}
    assert tested | {"phi3", "qwen2_moe", "jamba", "olmo2"} <= decoders
    encoders = {"bert", "roberta", "xlm-roberta", "distilbert", "mpnet", "modernbert", "electra"}
    encoder_decoders = {"t5", "mt5", "umt5", "bart", "mbart", "pegasus", "marian"}
    assert not (encoders | encoder_decoders) & decoders


def test_every_kind_has_a_row_and_every_row_says_what_checked_it() -> None:
    assert {e.kind for e in ENTRIES} == set(ModelKind)
    unchecked = [e for e in ENTRIES if not e.checked_against]
    assert [(e.kind, e.role) for e in unchecked] == [(ModelKind.TOKEN_CLASSIFIER, Role.PROCESS_REWARD_HEAD)]


def test_native_flags_match_the_recipes(tiny_model: Callable[..., Path]) -> None:
    """The docs' "native" column is true exactly where the kind's recipe loads an encoder, and the
    native loader takes a BERT folder for each of those (the rest split a checkpoint or read an MLM head)."""
    spec = load_model_spec(tiny_model("bert"), None, False)
    for kind, info in KINDS.items():
        recipe = RECIPES[kind]
        encoder = getattr(recipe.load, "func", recipe.load) is encoder_network
        assert encoder == info.native, kind
        if encoder:
            assert unsupported_reason(spec, recipe.network, Placement()) is None, kind


# -- one tiny model per registry row ------------------------------------------------------------
def _qwen2_values(vocab_size: int) -> dict[str, Any]:
    values = tiny_config("qwen2", vocab_size).to_dict()
    for key in ("architectures", "transformers_version", "auto_map"):
        values.pop(key, None)
    return values


def _pylate(tiny_model: Callable[..., Path], folder: Path) -> tuple[Path, dict[str, Any]]:
    shutil.copytree(tiny_model("bert"), folder)
    (folder / "config_sentence_transformers.json").write_text(
        json.dumps({"query_prefix": "[unused0]", "document_prefix": "[unused1]", "query_length": 8})
    )
    return folder, {}


def _stanford_colbert(tiny_model: Callable[..., Path], folder: Path) -> tuple[Path, dict[str, Any]]:
    source = tiny_model("bert")
    folder.mkdir()
    copy_tokenizer(source, folder)
    state = {f"bert.{k}": v for k, v in load_file(str(source / "model.safetensors")).items()}
    hidden = state["bert.embeddings.word_embeddings.weight"].shape[1]
    state["linear.weight"] = state["bert.embeddings.word_embeddings.weight"][:8, :hidden].clone()
    save_file(state, str(folder / "model.safetensors"))
    config = json.loads((source / "config.json").read_text()) | {"architectures": ["HF_ColBERT"]}
    (folder / "config.json").write_text(json.dumps(config))
    return folder, {}


def _decoder(family: str, auto_class: type, **kwargs: Any) -> Callable[..., tuple[Path, dict[str, Any]]]:
    def make(_tiny_model: Callable[..., Path], folder: Path) -> tuple[Path, dict[str, Any]]:
        build(folder, family, auto_class, **kwargs)
        return folder, {}

    return make


def _convert(family: str, convert: str, **engine: Any) -> Callable[..., tuple[Path, dict[str, Any]]]:
    def make(_tiny_model: Callable[..., Path], folder: Path) -> tuple[Path, dict[str, Any]]:
        _, tokenizer = build(folder, family, transformers.AutoModelForCausalLM)
        extra = dict(engine)
        if convert == "reward":  # math-shepherd: the step tag, then the good / bad tokens
            tag, good, bad = (tokenizer.convert_tokens_to_ids(t) for t in ("ки", "+", "-"))
            extra["pooler_config"] = {"step_tag_id": tag, "returned_token_ids": [good, bad]}
        return folder, {"convert": convert, **extra}

    return make


def _qwen2_remote(process: bool) -> Callable[..., tuple[Path, dict[str, Any]]]:
    def make(_tiny_model: Callable[..., Path], folder: Path) -> tuple[Path, dict[str, Any]]:
        tokenizer = build_tokenizer(folder)
        qwen2_reward_model(folder, _qwen2_values(len(tokenizer)), process=process)
        extra: dict[str, Any] = {"trust_remote_code": True}
        if process:
            extra["pooler_config"] = {"step_tag_id": tokenizer.convert_tokens_to_ids("ки")}
        return folder, extra

    return make


def _encoder(
    head: str | None, num_labels: int = 2, **engine: Any
) -> Callable[..., tuple[Path, dict[str, Any]]]:
    def make(tiny_model: Callable[..., Path], _folder: Path) -> tuple[Path, dict[str, Any]]:
        return tiny_model("bert", head=head, num_labels=num_labels), engine

    return make


def _bidirectional_reranker(_tiny_model: Callable[..., Path], folder: Path) -> tuple[Path, dict[str, Any]]:
    """NVIDIA's reranker layout, its remote code removed: poolrag runs it on transformers' Llama."""
    tokenizer = build_tokenizer(folder)
    values = tiny_config("llama", len(tokenizer)).to_dict()
    for key in ("architectures", "transformers_version", "auto_map"):
        values.pop(key, None)
    llama_bidirectional_reranker(folder, values)
    for code in folder.glob("*.py"):
        code.unlink()
    config = json.loads((folder / "config.json").read_text())
    config.pop("auto_map", None)
    config.update(architectures=["LlamaBidirectionalForSequenceClassification"], model_type="llama")
    (folder / "config.json").write_text(json.dumps(config))
    return folder, {}


_STEP = {"pooling_type": "STEP", "step_tag_id": 1012}  # "." in the MiniLM vocabulary
BUILDERS: dict[tuple[ModelKind, Role, str], Callable[..., tuple[Path, dict[str, Any]]]] = {
    (ModelKind.EMBEDDING, Role.BACKBONE, "encoder"): _encoder(None),
    (ModelKind.EMBEDDING, Role.BACKBONE, "decoder"): _decoder("qwen3", transformers.AutoModel),
    (ModelKind.EMBEDDING, Role.LM_HEAD, "decoder"): _convert("llama", "embed"),
    (ModelKind.COLBERT, Role.COLBERT, "encoder"): _stanford_colbert,
    (ModelKind.SEQUENCE_CLASSIFIER, Role.SEQUENCE_HEAD, "encoder"): _encoder("sequence", num_labels=1),
    (ModelKind.SCORE_HEAD_CLASSIFIER, Role.SEQUENCE_HEAD, "decoder"): _decoder(
        "qwen2", transformers.AutoModelForSequenceClassification, num_labels=1
    ),
    (ModelKind.SCORE_HEAD_CLASSIFIER, Role.SEQUENCE_HEAD, "encoder"): _bidirectional_reranker,
    (ModelKind.SCORE_HEAD_CLASSIFIER, Role.REWARD_HEAD, "decoder"): _qwen2_remote(process=False),
    (ModelKind.LM_HEAD_CLASSIFIER, Role.LM_HEAD, "decoder"): _convert(
        "qwen3", "classify", hf_overrides={"classifier_from_token": ["no", "yes"]}
    ),
    (ModelKind.STEP_REWARD, Role.LM_HEAD, "decoder"): _convert("mistral", "reward"),
    (ModelKind.STEP_REWARD, Role.PROCESS_REWARD_HEAD, "decoder"): _qwen2_remote(process=True),
    (ModelKind.TOKEN_CLASSIFIER, Role.TOKEN_HEAD, "encoder"): _encoder("token", pooler_config=_STEP),
    (ModelKind.TOKEN_CLASSIFIER, Role.PROCESS_REWARD_HEAD, "encoder"): _encoder(
        "token", pooler_config=_STEP, hf_overrides={"architectures": ["BertForProcessRewardModel"]}
    ),
    (ModelKind.SPLADE, Role.BACKBONE, "encoder"): lambda tiny_model, folder: (
        build_splade(folder, tiny_model("bert")),
        {},
    ),
    (ModelKind.BGE_M3, Role.BACKBONE, "encoder"): lambda tiny_model, folder: (
        build_bge_m3(folder, tiny_model("bert")),
        {},
    ),
    (ModelKind.DUAL_ENCODER, Role.DUAL_ENCODER, "encoder"): lambda tiny_model, folder: (
        build_clip(folder, tiny_model("bert")),
        {},
    ),
    (ModelKind.PAGE_RETRIEVER, Role.PAGE_RETRIEVER, "encoder"): lambda tiny_model, folder: (
        build_colpali(folder, tiny_model("bert")),
        {},
    ),
}


def _row_id(entry: Entry) -> str:
    return f"{entry.kind.value}-{entry.role.value}-{entry.backbone}"


def test_every_row_has_a_tiny_model() -> None:
    assert sorted(BUILDERS, key=str) == sorted(((e.kind, e.role, e.backbone) for e in ENTRIES), key=str)


def _check(engine: Engine, entry: Entry, engine_kwargs: dict[str, Any]) -> None:
    assert internals.model_kind(engine) is entry.kind
    assert lookup_architecture(engine.spec.architecture) is entry.role
    assert engine.spec.is_decoder == (entry.backbone == "decoder")
    assert engine.supported_tasks == entry.tasks
    # the kind's recipe joins a pooler to every task the row offers (or routes it to one that has)
    pipeline = internals.pipeline(engine)
    assert set(entry.tasks) <= set(internals.executor(engine).poolers) | set(pipeline.task_aliases)
    assert engine.score_kind == entry.info.score
    if "pooling_type" not in engine_kwargs.get("pooler_config", {}):  # the folder's, else the kind's
        default = default_pooling(entry.kind, entry.backbone == "decoder")
        assert engine.pooler_config.pooling_type == (engine.spec.pooler_defaults.pooling_type or default)


README = DOC.parents[1] / "README.md"
CONVERT_CLASSIFY = "with `convert='classify'`"


def _readme_cells(entry: Entry) -> dict[str, str]:
    """The README table's row for ``entry`` (rows follow ENTRIES): task -> cell text."""
    text = README.read_text(encoding="utf-8")
    table = text[text.index(README_START) : text.index(README_END)]
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    header = [cell.strip().strip("`") for cell in rows[0].strip("|").split(" | ")]
    row = [cell.strip() for cell in rows[2 + ENTRIES.index(entry)].strip("|").split(" | ")]
    return dict(zip(header[1:], row[1:], strict=True))


@pytest.mark.parametrize("entry", ENTRIES, ids=_row_id)
def test_the_engine_does_what_the_row_says(
    entry: Entry, tiny_model: Callable[..., Path], tmp_path: Path
) -> None:
    """Issue 30, item 6: "docs and code agree, a test reads both": the README's cells for the row
    are the tasks the engine offers, and a "with convert='classify'" cell is a task the engine
    then offers and runs."""
    # a folder name per row: transformers caches remote code by the folder's name
    folder, kwargs = BUILDERS[(entry.kind, entry.role, entry.backbone)](tiny_model, tmp_path / _row_id(entry))
    engine = Engine(folder, **kwargs)
    _check(engine, entry, kwargs)
    cells = _readme_cells(entry)
    assert {t for t, cell in cells.items() if cell and cell != CONVERT_CLASSIFY} == set(
        engine.supported_tasks
    )
    converted = [t for t, cell in cells.items() if cell == CONVERT_CLASSIFY]
    if converted:
        classifier = Engine(folder, **(kwargs | {"convert": "classify"}))
        for task in converted:
            assert task in classifier.supported_tasks
            assert len(classifier.encode(["a b c"], task)[0].outputs.data) == len(
                classifier.tokenize("a b c")
            )


REWARD_ROWS = [e for e in ENTRIES if "token_classify" in e.tasks and "token_classify" not in e.info.tasks]


PROCESS_REWARD_ROWS = [e for e in REWARD_ROWS if e.kind is ModelKind.STEP_REWARD]


def test_the_reward_rows_are_the_reward_models() -> None:
    assert {(e.kind, e.role) for e in REWARD_ROWS} == {
        (ModelKind.SCORE_HEAD_CLASSIFIER, Role.REWARD_HEAD),
        (ModelKind.STEP_REWARD, Role.LM_HEAD),
        (ModelKind.STEP_REWARD, Role.PROCESS_REWARD_HEAD),
    }


@pytest.mark.parametrize("entry", PROCESS_REWARD_ROWS, ids=_row_id)
def test_token_classify_on_a_process_reward_model_is_its_reward(
    entry: Entry, tiny_model: Callable[..., Path], tmp_path: Path
) -> None:
    """Issue 30, item 6: "`encode(pooling_task="token_classify")` is refused on reward models
    (vLLM's table maps `LLM.reward` to it)"; vLLM's token_classify pooler on a process reward
    model is STEP-pooled, so its rows are the rewards."""
    folder, kwargs = BUILDERS[(entry.kind, entry.role, entry.backbone)](tiny_model, tmp_path / _row_id(entry))
    engine = Engine(folder, **kwargs)
    texts = ["Step one. Step two. ки", "2 + 2 = 4 ки"]
    rewards = [o.outputs.data for o in engine.reward(texts)]
    tokens = [o.outputs.data for o in engine.encode(texts, "token_classify")]
    for got, expected in zip(tokens, rewards, strict=True):
        np.testing.assert_array_equal(got, expected)


def test_token_classify_on_a_reward_head_is_its_head_on_every_token(tmp_path: Path) -> None:
    """vLLM pools a ``*ForRewardModel`` (InternLM2, Qwen2-Math-RM) with ``pooler_for_token_classify``:
    an explicitly named ``token_classify`` is one row per token (it answered one value, the
    reward's), activated unless ``use_activation=False``; ``reward`` stays the last token's raw value."""
    folder, kwargs = _qwen2_remote(process=False)(None, tmp_path / "reward-tokens")
    engine = Engine(folder, **kwargs)
    texts = ["a b c d", "one two"]
    raw = engine.encode(texts, "token_classify", PoolingParams(use_activation=False))
    probs = engine.encode(texts, "token_classify")
    for text, rows, activated, reward in zip(texts, raw, probs, engine.reward(texts), strict=True):
        assert rows.outputs.data.shape == (len(engine.tokenize(text)), 1)
        np.testing.assert_allclose(rows.outputs.data[-1], reward.outputs.data, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(activated.outputs.data, 1 / (1 + np.exp(-rows.outputs.data)), rtol=1e-5)


def test_a_reward_model_with_convert_classify_is_a_classifier(tmp_path: Path) -> None:
    """Issue 30, item 6: "`*ForRewardModel` + `convert="classify"` is refused although
    docs/models.md and the README table promise it"."""
    folder, kwargs = _qwen2_remote(process=False)(None, tmp_path / "reward-classify")
    engine = Engine(folder, convert="classify", **kwargs)
    assert internals.model_kind(engine) is ModelKind.SCORE_HEAD_CLASSIFIER
    assert "token_classify" in engine.supported_tasks and "classify" in engine.supported_tasks
    probs = engine.classify(["a b c"])[0].outputs.probs
    assert np.all((np.asarray(probs) > 0) & (np.asarray(probs) < 1))  # one label: a sigmoid probability


def test_a_pylate_folder_is_the_colbert_row_too(tiny_model: Callable[..., Path], tmp_path: Path) -> None:
    folder, _ = _pylate(tiny_model, tmp_path / "pylate")
    engine = Engine(folder)
    assert (
        internals.model_kind(engine) is ModelKind.COLBERT
        and lookup_architecture(engine.spec.architecture) is Role.BACKBONE
    )
    assert engine.supported_tasks == KINDS[ModelKind.COLBERT].tasks


@pytest.mark.parametrize(
    ("head", "num_labels", "dropped"),
    [("sequence", 3, KINDS[ModelKind.SEQUENCE_CLASSIFIER].one_label_tasks), ("token", 2, ())],
)
def test_conditional_tasks_drop_out(
    tiny_model: Callable[..., Path], head: str, num_labels: int, dropped: tuple[str, ...]
) -> None:
    engine = Engine(tiny_model("bert", head=head, num_labels=num_labels))
    kind = internals.model_kind(engine)
    assert engine.supported_tasks == tuple(t for t in KINDS[kind].tasks if t not in dropped)
