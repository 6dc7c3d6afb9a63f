"""LLM embedders: LAST-token pooling, normalised, exact against transformers whatever the padding."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from tiny_decoders import BOS, EOS, PAD, SIDES, TEXTS, build, build_tokenizer, normalize, ref_last_hidden

from poolrag import Engine, PoolingParams
from poolrag.errors import InvalidInputError, ModelLoadError
from poolrag.testing import engine_internals as internals

BASE_MODELS = {
    "llama": "LlamaModel",
    "mistral": "MistralModel",
    "qwen2": "Qwen2Model",
    "qwen3": "Qwen3Model",
    "gemma2": "Gemma2Model",
}


@pytest.fixture(scope="module", params=sorted(BASE_MODELS))
def base_embedder(request, tmp_path_factory):
    family = request.param
    folder = tmp_path_factory.mktemp(family)
    model, tokenizer = build(folder, family, transformers.AutoModel)
    assert type(model).__name__ == BASE_MODELS[family]
    return family, model, tokenizer, Engine(folder)


@pytest.mark.parametrize("side", SIDES)
def test_base_model_embeddings_are_the_normalised_last_hidden_state(base_embedder, side):
    _family, model, tokenizer, engine = base_embedder
    assert engine.task == "embed" and engine.embedding_dim == model.config.hidden_size
    assert engine.pooler_config.pooling_type == "LAST"
    seqs = [tokenizer(t)["input_ids"] for t in TEXTS]
    assert max(map(len, seqs)) > 20 * min(map(len, seqs))  # a batch of very different lengths
    expected = normalize(ref_last_hidden(model, seqs, PAD, side))
    got = engine.embed_array(TEXTS)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)
    assert not np.allclose(got[0], got[1], atol=1e-3)  # the vectors depend on the text


def test_a_decoder_backbone_is_told_from_transformers_tables_and_pools_last(tmp_path):
    """OLMo-2 is on no poolrag list: transformers implements it as a causal LM and not as a masked
    LM, so its bare backbone is a decoder and pools LAST, as a Llama backbone does (not CLS)."""
    olmo, tokenizer = build(tmp_path / "olmo2", "olmo2", transformers.AutoModel)
    build(tmp_path / "llama", "llama", transformers.AutoModel)
    engine, listed = Engine(tmp_path / "olmo2"), Engine(tmp_path / "llama")
    assert type(olmo).__name__ == "Olmo2Model" and engine.spec.is_decoder
    assert engine.pooler_config.pooling_type == listed.pooler_config.pooling_type == "LAST"
    seqs = [tokenizer(t)["input_ids"] for t in TEXTS]
    expected = normalize(ref_last_hidden(olmo, seqs, PAD, "right"))
    np.testing.assert_allclose(engine.embed_array(TEXTS), expected, rtol=1e-5, atol=1e-5)


def _write_sentence_transformers_files(folder: Path, prompts: dict[str, str]) -> None:
    """The files the Qwen3-Embedding hub folder ships: written by sentence-transformers 3-5 beside the
    Qwen3ForCausalLM checkpoint, with those versions' module names (a save by the pinned 6.x keeps
    only the Qwen3Model backbone; tests/families' st-decoder-folder loads such a real save)."""
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": 32, "pooling_mode_lasttoken": True, "include_prompt": True})
    )
    (folder / "2_Normalize").mkdir()
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 512}))
    (folder / "config_sentence_transformers.json").write_text(
        json.dumps({"prompts": prompts, "default_prompt_name": None, "similarity_fn_name": "cosine"})
    )


QWEN3_QUERY_PROMPT = (
    "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:"
)


@pytest.fixture(scope="module")
def qwen3_embedding_folder(tmp_path_factory):
    """Qwen3-Embedding layout: a Qwen3ForCausalLM checkpoint, EOS appended, a query-only prompt."""
    folder = tmp_path_factory.mktemp("qwen3-embedding")
    build(folder, "qwen3", transformers.AutoModelForCausalLM, tokenizer_kwargs={"add_eos": True})
    _write_sentence_transformers_files(folder, {"query": QWEN3_QUERY_PROMPT, "document": ""})
    return folder


def test_sentence_transformers_llm_embedder_matches_sentence_transformers(qwen3_embedding_folder):
    from sentence_transformers import SentenceTransformer

    engine = Engine(qwen3_embedding_folder)
    assert engine.spec.architecture == "Qwen3ForCausalLM" and engine.task == "embed"
    assert engine.tokenize("hi")[-1] == EOS
    reference = SentenceTransformer(str(qwen3_embedding_folder), device="cpu")
    queries = ["What is a panda?", "capital of France"]
    docs = TEXTS
    got_q = engine.embed_array(queries, PoolingParams(input_type="query"))
    got_d = engine.embed_array(docs, PoolingParams(input_type="document"))
    np.testing.assert_allclose(got_q, reference.encode(queries, prompt_name="query"), atol=1e-5)
    np.testing.assert_allclose(got_d, reference.encode(docs), atol=1e-5)
    # the instruction goes on queries only: a query embedded as a document differs
    as_doc = engine.embed_array(queries, PoolingParams(input_type="document"))
    assert not np.allclose(as_doc, got_q, atol=1e-3)
    # score as vLLM scores an embedder: each text as embed() embeds it (a query ported from the
    # model card carries its instruction already); input_type="query" applies the folder's roles
    plain = engine.embed_array(queries[:1])[0]
    scores = [o.outputs.score for o in engine.score(queries[0], docs)]
    np.testing.assert_allclose(scores, got_d @ plain, atol=1e-5)
    roles = engine.score(queries[0], docs, PoolingParams(input_type="query"))
    np.testing.assert_allclose([o.outputs.score for o in roles], got_d @ got_q[0], atol=1e-5)
    with pytest.raises(InvalidInputError, match="names text_1's role"):
        engine.score(queries[0], docs, PoolingParams(input_type="document"))


def test_causal_lm_without_a_pooling_task_needs_convert(tmp_path):
    model, tokenizer = build(tmp_path, "llama", transformers.AutoModelForCausalLM)
    with pytest.raises(ModelLoadError, match="convert='embed'"):
        Engine(tmp_path)
    engine = Engine(tmp_path, convert="embed")
    assert engine.supported_tasks[0] == "embed"
    seqs = [tokenizer(t)["input_ids"] for t in TEXTS]
    expected = normalize(ref_last_hidden(model.model, seqs, PAD, "left"))
    np.testing.assert_allclose(engine.embed_array(TEXTS), expected, rtol=1e-5, atol=1e-5)


def test_matryoshka_truncates_the_last_token_state_before_normalising(tmp_path):
    model, tokenizer = build(tmp_path, "qwen3", transformers.AutoModel)
    engine = Engine(tmp_path, hf_overrides={"matryoshka_dimensions": [8, 16, 32]})
    seqs = [tokenizer(t)["input_ids"] for t in TEXTS]
    full = ref_last_hidden(model, seqs, PAD, None)
    got = engine.embed_array(TEXTS, PoolingParams(dimensions=16))
    np.testing.assert_allclose(got, normalize(full[:, :16]), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="dimensions must be one of"):
        engine.embed("hi", PoolingParams(dimensions=12))


def test_use_cache_is_off_for_decoder_backbones(base_embedder):
    *_, engine = base_embedder
    assert internals.loaded_module(engine).config.use_cache is False
    with torch.no_grad():
        assert engine.embed("hi")[0].outputs.embedding.shape == (32,)


def test_an_untied_lm_head_is_not_reported_unexpected(tmp_path, caplog):
    """A Qwen3-Embedding-style checkpoint with an untied ``lm_head``: no embedding reads it, and
    transformers' "LOAD REPORT ... lm_head.weight | UNEXPECTED" on every load read like a broken
    model (as BERT's missing pooler did)."""
    import logging

    build(tmp_path, "llama", transformers.AutoModelForCausalLM)  # untied
    _write_sentence_transformers_files(tmp_path, {"query": QWEN3_QUERY_PROMPT, "document": ""})
    with caplog.at_level(logging.WARNING, logger="transformers"):
        transformers.AutoModel.from_pretrained(tmp_path)
        assert "lm_head.weight" in caplog.text  # what transformers says of it
        caplog.clear()
        engine = Engine(tmp_path, model_impl="transformers", tune="off")
        assert "LOAD REPORT" not in caplog.text, caplog.text
    reference = transformers.AutoModel.from_pretrained(tmp_path).eval()
    ids = engine.tokenize("hi there")
    with torch.no_grad():
        last = reference(torch.tensor([ids])).last_hidden_state[0, -1]
    np.testing.assert_allclose(engine.embed_array(["hi there"])[0], normalize(last.numpy()), atol=1e-5)


EMBEDDINGGEMMA_PROMPTS = {"query": "task: search result | query: ", "document": "title: none | text: "}


@pytest.fixture(scope="module")
def embeddinggemma_folder(tmp_path_factory):
    """EmbeddingGemma's layout, saved by sentence-transformers: a Gemma3TextModel with bidirectional
    attention (its sliding window, 4 here, is shorter than the long text), mean pooling, two
    ``Dense`` layers (up to 3x and back, no activation), ``Normalize``, and task prompts."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense, Normalize, Pooling, Transformer

    backbone = tmp_path_factory.mktemp("gemma3-backbone")
    tokenizer = build_tokenizer(backbone, add_eos=True)
    torch.manual_seed(0)
    config = transformers.Gemma3TextConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        query_pre_attn_scalar=8,
        sliding_window=4,
        layer_types=["sliding_attention", "full_attention"],
        use_bidirectional_attention=True,
        max_position_embeddings=1024,
        initializer_range=0.2,
        pad_token_id=PAD,
        bos_token_id=BOS,
        eos_token_id=EOS,
    )
    transformers.Gemma3TextModel(config).eval().save_pretrained(backbone)
    identity = torch.nn.Identity()
    modules = [
        Transformer(str(backbone)),
        Pooling(32, pooling_mode="mean"),
        Dense(32, 96, bias=False, activation_function=identity),
        Dense(96, 32, bias=False, activation_function=identity),
        Normalize(),
    ]
    folder = tmp_path_factory.mktemp("embeddinggemma")
    SentenceTransformer(modules=modules, prompts=EMBEDDINGGEMMA_PROMPTS).save(str(folder))
    return folder


def test_embeddinggemma_layout_matches_sentence_transformers(embeddinggemma_folder):
    """Bidirectional Gemma 3 (not a causal decoder: MEAN from its Pooling module, not LAST), its
    Dense layers and its query / document prompts, as sentence-transformers' ``encode``; a batch of
    very different lengths gives each text's own vector."""
    from sentence_transformers import SentenceTransformer

    engine = Engine(embeddinggemma_folder)
    assert engine.spec.architecture == "Gemma3TextModel" and engine.pooler_config.pooling_type == "MEAN"
    reference = SentenceTransformer(str(embeddinggemma_folder), device="cpu")
    queries = ["What is a panda?", "capital of France"]
    got_q = engine.embed_array(queries, PoolingParams(input_type="query"))
    got_d = engine.embed_array(TEXTS, PoolingParams(input_type="document"))
    np.testing.assert_allclose(got_q, reference.encode(queries, prompt_name="query"), atol=1e-5)
    np.testing.assert_allclose(got_d, reference.encode(TEXTS, prompt_name="document"), atol=1e-5)
    one_by_one = [engine.embed_array([t], PoolingParams(input_type="document"))[0] for t in TEXTS]
    np.testing.assert_allclose(got_d, np.stack(one_by_one), atol=1e-5)


def test_a_long_input_is_cut_before_the_eos_as_sentence_transformers_cuts_it(tmp_path):
    """Qwen3-Embedding pools the EOS its tokenizer appends: a text longer than ``max_seq_length``
    keeps its first tokens and still ends in EOS (the tokenizer adds it after truncation), with or
    without the query instruction, as sentence-transformers' ``encode``."""
    from sentence_transformers import SentenceTransformer

    build(tmp_path, "qwen3", transformers.AutoModelForCausalLM, tokenizer_kwargs={"add_eos": True})
    _write_sentence_transformers_files(tmp_path, {"query": QWEN3_QUERY_PROMPT, "document": ""})
    (tmp_path / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 40}))
    engine = Engine(tmp_path)
    reference = SentenceTransformer(str(tmp_path), device="cpu")
    texts = [TEXTS[2], "What is a panda? " * 8, "hi"]
    assert len(engine.tokenize(texts[0])) > 40
    np.testing.assert_allclose(engine.embed_array(texts), reference.encode(texts), atol=1e-5)
    got_q = engine.embed_array(texts, PoolingParams(input_type="query"))
    np.testing.assert_allclose(got_q, reference.encode(texts, prompt_name="query"), atol=1e-5)


@pytest.mark.parametrize("mode", ["weightedmean", "mean"])
def test_a_decoder_pooled_by_weighted_mean_without_its_prompt_matches_sentence_transformers(tmp_path, mode):
    """SGPT's layout (a causal backbone, position-weighted mean) and an instruction left out of
    the pool (``include_prompt: false``): the [BOS] and the prompt attend, only the text's tokens
    are pooled, each at the weight of its position in the whole input."""
    from sentence_transformers import SentenceTransformer

    from poolrag.testing.tiny_models import write_sentence_transformers

    build(tmp_path, "qwen3", transformers.AutoModel)
    folder = write_sentence_transformers(
        tmp_path, pooling=mode, include_prompt=False, prompts={"query": "Given a query: "}, normalize=True
    )
    engine = Engine(folder)
    assert engine.pooler_config.pooling_type == {"weightedmean": "WEIGHTEDMEAN", "mean": "MEAN"}[mode]
    reference = SentenceTransformer(str(folder), device="cpu")
    expected = reference.encode(TEXTS, prompt_name="query")
    np.testing.assert_allclose(
        engine.embed_array(TEXTS, PoolingParams(prompt_name="query")), expected, atol=1e-5
    )
