"""``PoolingParams``: the per-call knobs, the names vLLM gives them, and ``verify``, the one rule
that checks them against a model and fills what a request leaves unset."""

from __future__ import annotations

import dataclasses

import pytest

from poolrag import PoolingParams
from poolrag.errors import DimensionsError, InvalidInputError, UnsupportedTaskError
from poolrag.model_facts import ModelFacts, ScoreKind
from poolrag.params import POOLING_TASKS, PoolerDefaults
from poolrag.request import ResolvedParams


def test_activation_is_vllms_alias_of_use_activation() -> None:
    """Issue 30, item 7: "``PoolingParams(activation=...)`` is a TypeError"."""
    assert PoolingParams(activation=False) == PoolingParams(use_activation=False)
    assert PoolingParams(activation=True).use_activation is True
    assert PoolingParams(activation=False, use_activation=False).use_activation is False
    assert "activation" not in {
        f.name for f in dataclasses.fields(PoolingParams)
    }  # no field of its own: cache keys do not move
    with pytest.raises(InvalidInputError, match="activation and use_activation disagree"):
        PoolingParams(activation=True, use_activation=False)
    # copies keep the value (the alias is read once, at construction)
    assert PoolingParams(activation=False).with_updates(dimensions=8).use_activation is False


def test_softmax_is_vllms_older_alias_of_use_activation() -> None:
    """vLLM's ``PoolingParams(softmax=False)`` (its classify examples' spelling before
    ``use_activation``) was a TypeError; it is the same switch, and no field of its own."""
    assert PoolingParams(softmax=False) == PoolingParams(use_activation=False)
    assert PoolingParams(softmax=True, use_activation=True).use_activation is True
    assert "softmax" not in {f.name for f in dataclasses.fields(PoolingParams)}
    with pytest.raises(InvalidInputError, match="softmax and use_activation disagree"):
        PoolingParams(softmax=False, use_activation=True)
    assert PoolingParams(softmax=False).clone().use_activation is False


@pytest.fixture(scope="module")
def facts(minilm_engine) -> ModelFacts:
    """A real model's facts (MiniLM: 384 dimensions, normalised, not Matryoshka) with every task
    open, so each case changes only the fact it is about."""
    return dataclasses.replace(
        minilm_engine.facts,
        supported_tasks=POOLING_TASKS,
    )


def test_verify_fills_every_default_per_task(facts: ModelFacts) -> None:
    """Issue 28, item 5: after ``verify`` the parameters are complete for the task and the model."""
    embed = PoolingParams(input_type="query").verify("embed", facts)
    assert embed == ResolvedParams(task="embed", dimensions=None, normalize=True, input_type="query")
    # the model's own defaults: its Matryoshka size and normalisation fill a silent request
    mrl = dataclasses.replace(facts, is_matryoshka=True, default_dimensions=64, normalizes_embeddings=False)
    assert PoolingParams().verify("embed", mrl) == ResolvedParams(
        task="embed", dimensions=64, normalize=False
    )
    assert PoolingParams(dimensions=128, normalize=True).verify("embed", mrl).dimensions == 128
    # dimensions and the embed normalisation default belong to embed only
    classify = PoolingParams().verify("classify", mrl)
    assert (classify.dimensions, classify.normalize, classify.use_activation) == (None, True, True)
    # what the pooler config says, then the request's own value on top
    no_activation = PoolerDefaults(use_activation=False)
    assert PoolingParams().verify("classify", facts, no_activation).use_activation is False
    assert PoolingParams(use_activation=True).verify("classify", facts, no_activation).use_activation is True
    # a sequence reward head is raw unless asked; STEP settings reach reward only
    step = PoolerDefaults(raw_rewards=True, step_tag_id=12, returned_token_ids=(0, 1), head_columns=2)
    reward = PoolingParams().verify("reward", facts, step)
    assert (reward.use_activation, reward.step_tag_id, reward.returned_token_ids) == (False, 12, (0, 1))
    tokens = PoolingParams().verify("token_classify", facts, step)
    assert (tokens.task, tokens.step_tag_id, tokens.returned_token_ids) == ("token_classify", None, (0, 1))
    sparse = PoolingParams(max_active_dims=5).verify("sparse_embed", facts, step)
    assert (sparse.max_active_dims, sparse.step_tag_id, sparse.returned_token_ids) == (5, None, None)


def test_verify_refuses_step_settings_the_models_pooler_would_not_read(facts: ModelFacts) -> None:
    """vLLM refuses step_tag_id / returned_token_ids without STEP pooling; poolrag dropped them where
    its pooler does not read them (a sequence reward's one value): now refused, naming the field."""
    sequence_reward = PoolerDefaults(raw_rewards=True, token_rows=frozenset({"token_classify"}))
    for params, field in (
        (PoolingParams(step_tag_id=3), "step_tag_id"),
        (PoolingParams(returned_token_ids=[0]), "returned_token_ids"),
    ):
        with pytest.raises(InvalidInputError, match=f"{field} .* this model's reward") as refused:
            params.verify("reward", facts, sequence_reward)
        assert refused.value.param == field
    # per-token rows take columns, but only a STEP-pooled reward selects step tokens
    assert PoolingParams(returned_token_ids=[0]).verify(
        "token_classify", facts, sequence_reward
    ).returned_token_ids == (0,)
    with pytest.raises(InvalidInputError, match="this model's token_classify does not pool step tokens"):
        PoolingParams(step_tag_id=3).verify("token_classify", facts, sequence_reward)
    step = PoolerDefaults(token_rows=frozenset({"reward"}), task_aliases={"token_classify": "reward"})
    assert PoolingParams(step_tag_id=3).verify("token_classify", facts, step).step_tag_id == 3
    # facts alone (the server before the engine): not known there, so left to the engine's check
    assert PoolingParams(step_tag_id=3).verify("reward", facts).step_tag_id == 3


def test_verify_answers_an_aliased_task_with_its_pooler(facts: ModelFacts) -> None:
    """A reward model's ``token_classify`` is its ``reward``: checked as asked, filled as run."""
    aliased = PoolerDefaults(task_aliases={"token_classify": "reward"}, step_tag_id=3)
    resolved = PoolingParams().verify("token_classify", facts, aliased)
    assert (resolved.task, resolved.step_tag_id) == ("reward", 3)
    with pytest.raises(UnsupportedTaskError):
        PoolingParams().verify(
            "token_classify", dataclasses.replace(facts, supported_tasks=("reward",)), aliased
        )


def test_dimensions_on_a_model_without_matryoshka_is_one_clear_error(facts: ModelFacts) -> None:
    with pytest.raises(DimensionsError) as refused:
        PoolingParams(dimensions=64).verify("embed", facts)
    message = str(refused.value)
    assert "\n" not in message and "not a Matryoshka model" in message and "full size is 384" in message
    assert refused.value.param == "dimensions"  # the field at fault, as every other refusal names it
    # every door reaches this rule (a Ray actor's ingest too): each way to declare the model is named
    assert 'hf_overrides={"is_matryoshka": True}' in message and "--assume-matryoshka" in message
    assert (
        PoolingParams(dimensions=384).verify("embed", facts).dimensions == 384
    )  # the full size cuts nothing
    # a model's own default size is held to the same rule as a requested one
    with pytest.raises(DimensionsError, match="not a Matryoshka model"):
        PoolingParams().verify("embed", dataclasses.replace(facts, default_dimensions=64))
    with pytest.raises(DimensionsError, match="applies to embeddings, not to task 'classify'"):
        PoolingParams(dimensions=384).verify("classify", facts)


def test_verify_refuses_returned_token_ids_outside_the_head(facts: ModelFacts) -> None:
    """Checked before the request joins a batch: a pooler must never fail work other callers share."""
    head = PoolerDefaults(head_columns=2)
    with pytest.raises(InvalidInputError, match=r"ids in \[0, 2\)"):
        PoolingParams(returned_token_ids=(2,)).verify("reward", facts, head)
    with pytest.raises(InvalidInputError, match="max_active_dims applies to sparse_embed"):
        PoolingParams(max_active_dims=3).verify("embed", facts)


def test_normalize_is_refused_where_it_would_change_nothing(facts: ModelFacts) -> None:
    """Scores and labels are not normalised, so ``normalize`` on them would be silently ignored;
    it is refused, naming the field (vLLM's ``verify`` refuses it too)."""
    cross_encoder = dataclasses.replace(facts, score_kind=ScoreKind.CROSS_ENCODER)
    for task, model in (
        ("sparse_embed", facts),
        ("classify", facts),
        ("token_classify", facts),
        ("reward", facts),
        ("score", cross_encoder),
    ):
        with pytest.raises(
            InvalidInputError, match=f"normalize applies to vectors, not to task '{task}'"
        ) as refused:
            PoolingParams(normalize=False).verify(task, model)
        assert refused.value.param == "normalize"
    # a bi-encoder's score compares vectors, which normalize does shape (dot-product similarity);
    # it has no activation to switch off
    assert PoolingParams(normalize=False).verify("score", facts).normalize is False
    with pytest.raises(InvalidInputError, match="use_activation applies to cross-encoder scores") as refused:
        PoolingParams(use_activation=False).verify("score", facts)
    assert refused.value.param == "use_activation"


def test_use_activation_is_vllms_newer_name_of_normalize_on_vectors(facts: ModelFacts) -> None:
    for task in ("embed", "token_embed"):
        assert PoolingParams(use_activation=False).verify(task, facts).normalize is False
        assert PoolingParams(use_activation=False, normalize=False).verify(task, facts).normalize is False
        with pytest.raises(InvalidInputError, match="normalize and use_activation disagree") as refused:
            PoolingParams(use_activation=False, normalize=True).verify(task, facts)
        assert refused.value.param == "use_activation"


def test_a_similarity_score_takes_input_type_query_only(facts: ModelFacts) -> None:
    """A cosine or MaxSim score embeds text_1 as the query and text_2 as documents, so
    ``input_type="document"`` names no role it has: refused by verify, for every caller alike."""
    assert PoolingParams(input_type="query").verify("score", facts).input_type == "query"
    for kind in (ScoreKind.COSINE, ScoreKind.MAXSIM):
        with pytest.raises(InvalidInputError, match="names text_1's role") as refused:
            PoolingParams(input_type="document").verify("score", dataclasses.replace(facts, score_kind=kind))
        assert refused.value.param == "input_type"
    # a cross-encoder reads each pair jointly: no roles to refuse
    cross_encoder = dataclasses.replace(facts, score_kind=ScoreKind.CROSS_ENCODER)
    assert PoolingParams(input_type="document").verify("score", cross_encoder).input_type == "document"
    # the rule is the score's: embedding documents takes it
    assert PoolingParams(input_type="document").verify("embed", facts).input_type == "document"


def test_a_size_out_of_range_names_dimensions_as_its_param(facts: ModelFacts) -> None:
    """docs/engine.md: an error names the request field at fault in ``error.param``. An engine
    caller's ``DimensionsError`` had ``param=None`` (only the server filled in ``dimensions``)."""
    for size in (10_000, 0):
        with pytest.raises(DimensionsError) as refused:
            PoolingParams(dimensions=size).verify("embed", facts)
        assert refused.value.param == "dimensions"
