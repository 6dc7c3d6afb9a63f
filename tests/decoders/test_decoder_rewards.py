"""Reward models: remote-code sequence RMs (one score), process RMs with STEP pooling (one per step)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers
from decoder_remote_code import llama_bidirectional_reranker, qwen2_reward_model
from tiny_decoders import PAD, SIDES, TEXTS, build, build_tokenizer, run_padded, softmax, tiny_config

from poolrag import Engine, PoolingParams
from poolrag.errors import InvalidInputError, ModelLoadError
from poolrag.testing import engine_internals as internals

STEPS = [
    "Step 1: add two and three ки Step 2: multiply by four ки the answer is twenty ки",
    "What is a panda? ки",
    "no steps here",
    " ".join(["Step 1: add two and three ки"] * 8),
]


def _config_values(vocab_size: int, family: str = "qwen2") -> dict:
    values = tiny_config(family, vocab_size).to_dict()
    for key in ("architectures", "transformers_version", "auto_map"):
        values.pop(key, None)
    return values


# -- math-shepherd: a *ForCausalLM PRM read at the step tags -------------------------------------
@pytest.fixture(scope="module")
def math_shepherd(tmp_path_factory):
    folder = tmp_path_factory.mktemp("math-shepherd")
    model, tokenizer = build(folder, "mistral", transformers.AutoModelForCausalLM)
    tag, good, bad = (tokenizer.convert_tokens_to_ids(t) for t in ("ки", "+", "-"))
    pooler = {"pooling_type": "STEP", "step_tag_id": tag, "returned_token_ids": [good, bad]}
    return model, tokenizer, Engine(folder, pooler_config=pooler), (tag, good, bad)


def test_step_pooling_on_a_known_token_sequence(math_shepherd):
    model, _tokenizer, engine, (tag, good, bad) = math_shepherd
    # token_classify is vLLM's name for the same call (LLM.reward), issue 30 item 6
    assert engine.supported_tasks == ("reward", "token_classify") and engine.task == "reward"
    ids = [5, 9, tag, 7, 8, 11, tag, 3, tag]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0]
    by_hand = softmax(logits[[2, 6, 8]][:, [good, bad]].numpy())  # positions of the tag, by hand
    got = engine.reward({"prompt_token_ids": ids})[0].outputs.data
    assert got.shape == (3, 2)
    np.testing.assert_allclose(got, by_hand, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.sum(1), 1.0, atol=1e-6)


@pytest.mark.parametrize("side", SIDES)
def test_step_rewards_match_the_causal_lm_whatever_the_padding(math_shepherd, side):
    model, tokenizer, engine, (tag, good, bad) = math_shepherd
    seqs = [tokenizer(t)["input_ids"] for t in STEPS]

    def pick(out, batch, last):
        rows = []
        for i in range(len(last)):
            mask = (batch["input_ids"][i] == tag) & (batch["attention_mask"][i] == 1)
            rows.append(softmax(out.logits[i][mask][:, [good, bad]].numpy()))
        return rows

    if side is None:
        expected = [run_padded(model, [s], PAD, "right", pick)[0] for s in seqs]
    else:
        expected = run_padded(model, seqs, PAD, side, pick)
    got = [r.outputs.data for r in engine.reward(STEPS)]
    assert [g.shape[0] for g in got] == [3, 1, 0, 8]
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_step_columns_and_activation_can_change_per_call(math_shepherd):
    model, tokenizer, engine, (tag, good, bad) = math_shepherd
    swapped = engine.reward(STEPS[0], PoolingParams(returned_token_ids=(bad, good)))[0].outputs.data
    default = engine.reward(STEPS[0])[0].outputs.data
    np.testing.assert_allclose(swapped, default[:, ::-1], atol=1e-6)
    raw = engine.reward(STEPS[0], PoolingParams(use_activation=False))[0].outputs.data
    ids = tokenizer(STEPS[0])["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0]
    np.testing.assert_allclose(
        raw, logits[torch.tensor(ids) == tag][:, [good, bad]].numpy(), rtol=1e-5, atol=1e-5
    )


def test_bad_returned_token_ids_fail_the_call_not_the_engine(math_shepherd):
    *_, engine, (_tag, good, _bad) = math_shepherd
    with pytest.raises(ValueError, match="returned_token_ids must be a non-empty list of ids in"):
        engine.reward(STEPS[0], PoolingParams(returned_token_ids=(good, 10**6)))
    with pytest.raises(ValueError, match="non-empty"):
        engine.reward(STEPS[0], PoolingParams(returned_token_ids=()))
    assert engine.reward(STEPS[0])[0].outputs.data.shape == (3, 2)  # the engine still serves


def test_a_language_model_prm_needs_its_returned_token_ids(math_shepherd, tmp_path):
    build(tmp_path, "mistral", transformers.AutoModelForCausalLM)
    with pytest.raises(ModelLoadError, match="returned_token_ids"):
        Engine(tmp_path, pooler_config={"pooling_type": "STEP", "step_tag_id": 5})
    with pytest.raises(ModelLoadError, match="returned_token_ids"):
        Engine(tmp_path, convert="reward")


# -- remote code: Qwen2ForRewardModel / Qwen2ForProcessRewardModel -------------------------------
@pytest.fixture(scope="module")
def qwen2_rm(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qwen2-rm")
    tokenizer = build_tokenizer(folder)
    model = qwen2_reward_model(folder, _config_values(len(tokenizer)))
    return model, transformers.AutoTokenizer.from_pretrained(folder), folder


def test_remote_code_reward_model_needs_trust_remote_code(qwen2_rm):
    *_, folder = qwen2_rm
    with pytest.raises(ModelLoadError, match="trust_remote_code"):
        Engine(folder)


@pytest.mark.parametrize("side", SIDES)
def test_qwen2_reward_model_gives_one_raw_score_per_text(qwen2_rm, side):
    model, tokenizer, folder = qwen2_rm
    engine = Engine(folder, trust_remote_code=True)
    assert engine.spec.architecture == "Qwen2ForRewardModel" and engine.spec.num_labels == 1
    # token_classify: the head on every token, as vLLM's pooler for *ForRewardModel
    assert set(engine.supported_tasks) == {"classify", "score", "reward", "token_classify"}
    seqs = [tokenizer(t)["input_ids"] for t in TEXTS]
    expected = run_padded(model, seqs, PAD, side, lambda out, batch, last: out.logits.float().numpy())
    rewards = engine.reward(TEXTS)
    assert all(r.outputs.data.shape == (1,) for r in rewards)
    np.testing.assert_allclose(np.stack([r.outputs.data for r in rewards]), expected, rtol=1e-5, atol=1e-5)


def test_step_settings_are_refused_where_the_reward_is_one_value(qwen2_rm):
    """vLLM refuses step_tag_id / returned_token_ids on a reward model without STEP pooling; here they
    were dropped (the reward came back unchanged): refused per call and in the pooler config."""
    *_, folder = qwen2_rm
    engine = Engine(folder, trust_remote_code=True)
    with pytest.raises(InvalidInputError, match="step_tag_id selects the step tokens") as refused:
        engine.reward(TEXTS[:1], PoolingParams(step_tag_id=5))
    assert refused.value.param == "step_tag_id"
    with pytest.raises(InvalidInputError, match="returned_token_ids picks columns of per-token rows"):
        engine.reward(TEXTS[:1], PoolingParams(returned_token_ids=[0]))
    with pytest.raises(InvalidInputError, match="this model's token_classify does not pool step tokens"):
        engine.encode(TEXTS[:1], "token_classify", PoolingParams(step_tag_id=5))
    (rows,) = engine.encode(TEXTS[:1], "token_classify", PoolingParams(returned_token_ids=[0]))
    assert rows.outputs.data.shape[1] == 1  # per-token rows: the columns apply
    with pytest.raises(ModelLoadError, match="pooler_config step_tag_id selects the step tokens"):
        Engine(folder, trust_remote_code=True, pooler_config={"step_tag_id": 5})


def test_qwen2_process_reward_model_scores_each_step(tmp_path):
    tokenizer = build_tokenizer(tmp_path)
    model = qwen2_reward_model(tmp_path, _config_values(len(tokenizer)), process=True)
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path)
    tag = tokenizer.convert_tokens_to_ids("ки")
    engine = Engine(tmp_path, trust_remote_code=True, pooler_config={"step_tag_id": tag})
    assert engine.supported_tasks == ("reward", "token_classify")  # token_classify: vLLM's LLM.reward
    got = [r.outputs.data for r in engine.reward(STEPS)]
    for text, rows in zip(STEPS, got, strict=True):
        ids = torch.tensor([tokenizer(text)["input_ids"]])
        with torch.no_grad():
            logits = model(ids).logits[0]
        np.testing.assert_allclose(rows, softmax(logits[ids[0] == tag].numpy()), rtol=1e-5, atol=1e-6)
    assert [g.shape for g in got] == [(3, 2), (1, 2), (0, 2), (8, 2)]


# -- remote code: a bidirectional Llama reranker ----------------------------------------------
@pytest.mark.parametrize("side", SIDES)
def test_llama_bidirectional_reranker_runs_its_own_forward(tmp_path_factory, side):
    folder = tmp_path_factory.mktemp("bidirectional")
    tokenizer = build_tokenizer(folder)
    model = llama_bidirectional_reranker(folder, _config_values(len(tokenizer), "llama"))
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    engine = Engine(folder, trust_remote_code=True)
    assert (
        engine.score_kind == "cross-encoder" and internals.model_kind(engine).value == "sequence_classifier"
    )
    query = "What is a panda?"
    seqs = [tokenizer(query, d)["input_ids"] for d in TEXTS]
    logits = run_padded(model, seqs, PAD, side, lambda out, batch, last: out.logits.float().numpy())[:, 0]
    got = [s.outputs.score for s in engine.score(query, TEXTS)]
    np.testing.assert_allclose(got, 1 / (1 + np.exp(-logits)), rtol=1e-5, atol=1e-6)
    # attention really is bidirectional: the first token's state depends on later tokens
    with torch.no_grad():
        a = model.model(torch.tensor([[5, 6, 7]])).last_hidden_state[0, 0]
        b = model.model(torch.tensor([[5, 6, 9]])).last_hidden_state[0, 0]
    assert not torch.allclose(a, b)
