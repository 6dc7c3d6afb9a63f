"""convert="classify": LLM rerankers scored from a few lm_head rows at the last token."""

from __future__ import annotations

import numpy as np
import pytest
import transformers
from reranker_prompts import bge_gemma_prompt, mxbai_v2_prompt, qwen3_reranker_prompt
from tiny_decoders import PAD, SIDES, TEXTS, build, ref_token_logits, softmax

from poolrag import Engine, PoolingParams
from poolrag.errors import InputTooLongError, InvalidInputError, ModelLoadError, UnsupportedTaskError
from poolrag.pooling.lm_head_rows import LMHeadRowsHead
from poolrag.testing import engine_internals as internals

QUERY = "What is a panda?"
DEFAULT_INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"

# (family, shipped template, classifier tokens (negative first), tokenizer adds <bos>, documented prompt)
RECIPES = {
    "qwen3-reranker": (
        "qwen3",
        "qwen3_reranker",
        ["no", "yes"],
        False,
        lambda q, d: qwen3_reranker_prompt(q, d, DEFAULT_INSTRUCTION),
    ),
    "bge-reranker-v2-gemma": ("gemma", "bge_reranker_v2_gemma", ["Yes"], True, bge_gemma_prompt),
    "mxbai-rerank-v2": ("qwen2", "mxbai_rerank_v2", ["0", "1"], False, mxbai_v2_prompt),
    # softcapped final logits (Gemma-2) and an untied lm_head (Llama) go through the same path
    "gemma2-softcap": (
        "gemma2",
        "qwen3_reranker",
        ["no", "yes"],
        True,
        lambda q, d: qwen3_reranker_prompt(q, d, DEFAULT_INSTRUCTION),
    ),
    "llama-untied": ("llama", "mxbai_rerank_v2", ["0", "1"], True, mxbai_v2_prompt),
}


@pytest.fixture(scope="module", params=sorted(RECIPES))
def reranker(request, tmp_path_factory):
    family, template, tokens, add_bos, prompt = RECIPES[request.param]
    folder = tmp_path_factory.mktemp(request.param)
    model, tokenizer = build(
        folder, family, transformers.AutoModelForCausalLM, tokenizer_kwargs={"add_bos": add_bos}
    )
    engine = Engine(
        folder, convert="classify", score_template=template, hf_overrides={"classifier_from_token": tokens}
    )
    ids = [tokenizer.convert_tokens_to_ids(t) for t in tokens]
    return model, tokenizer, engine, ids, prompt


@pytest.mark.parametrize("side", SIDES)
def test_llm_reranker_score_matches_the_causal_lm_reference(reranker, side):
    model, tokenizer, engine, ids, prompt = reranker
    assert engine.score_kind == "cross-encoder" and set(engine.supported_tasks) == {"classify", "score"}
    seqs = [tokenizer(prompt(QUERY, d))["input_ids"] for d in TEXTS]
    logits = ref_token_logits(model, seqs, PAD, side, ids)
    if len(ids) == 2:  # Qwen3-Reranker / mxbai: p(positive) = softmax over (negative, positive)
        expected, raw = softmax(logits)[:, 1], logits[:, 1] - logits[:, 0]
    else:  # bge-reranker-v2-gemma: the "Yes" logit (sigmoid-normalised by default)
        raw = logits[:, 0]
        expected = 1 / (1 + np.exp(-raw))
    scores = engine.score(QUERY, TEXTS)
    np.testing.assert_allclose([s.outputs.score for s in scores], expected, rtol=1e-5, atol=1e-6)
    assert [s.prompt_token_ids for s in scores] == seqs  # exactly the documented prompt was run
    raw_scores = engine.score(QUERY, TEXTS, PoolingParams(use_activation=False))
    np.testing.assert_allclose([s.outputs.score for s in raw_scores], raw, rtol=1e-5, atol=1e-5)
    assert np.ptp(expected) > 1e-4  # different documents, different scores


def test_only_the_chosen_lm_head_rows_are_kept(reranker):
    model, _tokenizer, engine, ids, _prompt = reranker
    backbone = internals.loaded_module(engine)
    assert backbone.get_output_embeddings() is None if hasattr(backbone, "get_output_embeddings") else True
    assert not hasattr(backbone, "lm_head")
    head = internals.executor(engine).poolers["score"].score
    assert isinstance(head, LMHeadRowsHead) and head.rows.shape == (len(ids), model.config.hidden_size)
    np.testing.assert_array_equal(
        head.rows.numpy(), model.get_output_embeddings().weight[ids].detach().numpy()
    )


def test_vllm_style_overrides_load_the_same_reranker(tmp_path):
    """vLLM serves the original Qwen3-Reranker with these hf_overrides and no convert flag."""
    build(tmp_path, "qwen3", transformers.AutoModelForCausalLM, tokenizer_kwargs={"add_bos": False})
    overrides = {
        "architectures": ["Qwen3ForSequenceClassification"],
        "classifier_from_token": ["no", "yes"],
        "is_original_qwen3_reranker": True,
    }
    vllm_style = Engine(tmp_path, hf_overrides=overrides, score_template="qwen3_reranker")
    converted = Engine(
        tmp_path,
        convert="classify",
        hf_overrides={"classifier_from_token": ["no", "yes"]},
        score_template="qwen3_reranker",
    )
    assert internals.model_kind(vllm_style).value == "lm_head_classifier"
    a = [s.outputs.score for s in vllm_style.score(QUERY, TEXTS)]
    b = [s.outputs.score for s in converted.score(QUERY, TEXTS)]
    np.testing.assert_allclose(a, b, atol=1e-7)


def test_classify_on_a_rendered_prompt_gives_p_yes(reranker):
    *_, engine, _ids, prompt = reranker
    text = prompt(QUERY, TEXTS[1])
    probs = engine.classify(text)[0].outputs.probs
    assert probs.shape == (1,)
    assert probs[0] == pytest.approx(engine.score(QUERY, TEXTS[1])[0].outputs.score, abs=1e-6)


def test_template_per_call_and_document_truncation_keep_the_prompt_tail(tmp_path):
    model, tokenizer = build(
        tmp_path, "qwen3", transformers.AutoModelForCausalLM, tokenizer_kwargs={"add_bos": False}
    )
    engine = Engine(
        tmp_path, convert="classify", hf_overrides={"classifier_from_token": ["no", "yes"]}, max_model_len=200
    )
    per_call = engine.score(QUERY, TEXTS[:2], score_template="qwen3_reranker")
    seqs = [tokenizer(qwen3_reranker_prompt(QUERY, d, DEFAULT_INSTRUCTION))["input_ids"] for d in TEXTS[:2]]
    assert [s.prompt_token_ids for s in per_call] == seqs
    with pytest.raises(InputTooLongError):
        engine.score(QUERY, TEXTS[2], PoolingParams(truncate=False), score_template="qwen3_reranker")
    cut = engine.score(QUERY, TEXTS[2], score_template="qwen3_reranker")[0]  # cut by default
    assert cut.truncated
    tail = tokenizer("<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")["input_ids"]
    assert len(cut.prompt_token_ids) <= 200 and cut.prompt_token_ids[-len(tail) :] == tail
    reference = softmax(
        ref_token_logits(
            model,
            [cut.prompt_token_ids],
            PAD,
            None,
            [tokenizer.convert_tokens_to_ids(t) for t in ("no", "yes")],
        )
    )
    assert cut.outputs.score == pytest.approx(float(reference[0, 1]), abs=1e-6)


def test_more_than_two_tokens_make_a_softmax_classifier(tmp_path):
    model, tokenizer = build(tmp_path, "qwen2", transformers.AutoModelForCausalLM)
    tokens = ["0", "1", "yes"]
    engine = Engine(tmp_path, convert="classify", hf_overrides={"classifier_from_token": tokens})
    assert engine.supported_tasks == ("classify",) and list(engine.id2label.values()) == tokens
    ids = [tokenizer.convert_tokens_to_ids(t) for t in tokens]
    seqs = [tokenizer(t)["input_ids"] for t in TEXTS]
    expected = softmax(ref_token_logits(model, seqs, PAD, "right", ids))
    np.testing.assert_allclose(
        np.stack([o.outputs.probs for o in engine.classify(TEXTS)]), expected, atol=1e-6
    )
    with pytest.raises(UnsupportedTaskError):
        engine.score(QUERY, TEXTS)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"classifier_from_token": ["no", "yes"], "method": "bogus"}, "method 'bogus' is not one of vLLM's"),
        (
            {"classifier_from_token": ["yes"], "method": "from_2_way_softmax"},
            "needs two classifier_from_token",
        ),
        (
            {"is_original_qwen3_reranker": True, "classifier_from_token": ["yes"]},
            'add "classifier_from_token"',
        ),
        ({"is_original_qwen3_reranker": True}, 'add "classifier_from_token": \\["no", "yes"\\]'),
    ],
)
def test_vllm_reranker_overrides_are_refused_where_vllm_refuses_them(tmp_path, overrides, message):
    """They loaded and scored something else (a bogus method; sigmoid(l_yes) for a 2-way softmax),
    or failed later on a randomly initialised score head, after transformers' load report."""
    build(tmp_path, "qwen3", transformers.AutoModelForCausalLM, tokenizer_kwargs={"add_bos": False})
    overrides = {"architectures": ["Qwen3ForSequenceClassification"], **overrides}
    with pytest.raises(ModelLoadError, match=message):
        Engine(tmp_path, hf_overrides=overrides)


def test_conversion_errors_are_clear(tmp_path):
    build(tmp_path / "lm", "qwen3", transformers.AutoModelForCausalLM)
    with pytest.raises(ModelLoadError, match="classifier_from_token"):
        Engine(tmp_path / "lm", convert="classify")
    with pytest.raises(ModelLoadError, match="not a single token"):
        Engine(
            tmp_path / "lm",
            convert="classify",
            hf_overrides={"classifier_from_token": ["no", "panda bamboo"]},
        )
    with pytest.raises(InvalidInputError, match="convert must be"):
        Engine(tmp_path / "lm", convert="generate")  # EngineArgs' rule, before anything loads
    build(tmp_path / "base", "qwen3", transformers.AutoModel)
    with pytest.raises(ModelLoadError, match="needs a \\*ForCausalLM"):
        Engine(tmp_path / "base", convert="classify", hf_overrides={"classifier_from_token": ["no", "yes"]})
    build(tmp_path / "untied", "llama", transformers.AutoModel)  # a backbone: no lm_head weights at all
    with pytest.raises(ModelLoadError, match=r"no weights for lm_head\.weight"):
        Engine(
            tmp_path / "untied",
            hf_overrides={"architectures": ["LlamaForCausalLM"], "classifier_from_token": ["no", "yes"]},
        )
    engine = Engine(tmp_path / "lm", convert="embed")
    with pytest.raises(ValueError, match="score templates format pairs for cross-encoders"):
        engine.score(QUERY, TEXTS[:1], score_template="qwen3_reranker")


@pytest.mark.parametrize("family", ["qwen3", "qwen2"])
def test_a_long_document_is_cut_before_templating_and_scores_as_the_whole(tmp_path, family):
    """A truncated templated pair tokenises only what can be kept of a long document, with the
    same ids as rendering and tokenising the whole document (issue 27)."""
    from poolrag.request import ResolvedParams
    from poolrag.tokenization.score_template import load_score_template, templated_pair_requests
    from poolrag.tokenization.text_cut import TextCut

    _, tokenizer = build(
        tmp_path, family, transformers.AutoModelForCausalLM, tokenizer_kwargs={"add_bos": False}
    )
    cut = TextCut(tokenizer)
    assert cut.enabled
    document = " ".join([TEXTS[2]] * 400)
    pairs = [(QUERY, document), (QUERY, TEXTS[0])]
    template = load_score_template("qwen3_reranker")
    params = ResolvedParams(task="score")
    whole = templated_pair_requests(tokenizer, template, pairs, params, 200, -1)
    kept = templated_pair_requests(tokenizer, template, pairs, params, 200, -1, cut)
    assert [r.token_ids for r in kept] == [r.token_ids for r in whole]
    assert len(cut.prefix(document, 200)) < len(document) // 10


def test_logit_calibration_applies_to_llm_rerankers_as_to_cross_encoders(reranker, request):
    """vLLM's ``logit_mean`` / ``logit_sigma``: the relevance logit is calibrated before the sigmoid,
    so a fused score means the same for an LLM reranker as for a cross-encoder."""
    model, tokenizer, engine, ids, prompt = reranker
    _family, template, tokens, _bos, _prompt = RECIPES[request.node.callspec.params["reranker"]]
    seqs = [tokenizer(prompt(QUERY, d))["input_ids"] for d in TEXTS]
    logits = ref_token_logits(model, seqs, PAD, "left", ids)
    raw = logits[:, 1] - logits[:, 0] if len(ids) == 2 else logits[:, 0]
    calibrated = Engine(
        engine.model_folder,
        convert="classify",
        score_template=template,
        hf_overrides={"classifier_from_token": tokens},
        pooler_config={"logit_mean": 0.7, "logit_sigma": 3.0},
    )
    scores = [s.outputs.score for s in calibrated.score(QUERY, TEXTS)]
    np.testing.assert_allclose(scores, 1 / (1 + np.exp(-(raw - 0.7) / 3.0)), rtol=1e-5, atol=1e-6)
