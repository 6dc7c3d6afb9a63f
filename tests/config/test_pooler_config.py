"""``PoolerConfig`` takes vLLM's keys in every form vLLM's own class does: constructor keywords,
a dict, JSON text."""

from __future__ import annotations

import pytest

from poolrag import PoolerConfig
from poolrag.errors import InvalidInputError


def test_vllms_task_and_split_pooling_keys_are_constructor_keywords() -> None:
    """``PoolerConfig(task=...)`` and ``PoolerConfig(seq_pooling_type=...)`` as vLLM's examples
    write them (both were a TypeError); the split keys fold into ``pooling_type``."""
    assert PoolerConfig(task="token_embed").task == "token_embed"
    assert PoolerConfig(seq_pooling_type="CLS").pooling_type == "CLS"
    assert PoolerConfig(seq_pooling_type="MEAN", tok_pooling_type="ALL").pooling_type == "MEAN"
    assert PoolerConfig(tok_pooling_type="step").pooling_type == "STEP"
    assert PoolerConfig.from_value({"task": "token_embed", "seq_pooling_type": "CLS"}) == PoolerConfig(
        pooling_type="CLS", task="token_embed"
    )
    assert PoolerConfig.from_value('{"task": "classify"}').task == "classify"
    with pytest.raises(InvalidInputError, match="names two pooling methods"):
        PoolerConfig(pooling_type="MEAN", seq_pooling_type="CLS")


def test_a_task_no_model_runs_is_refused_naming_the_tasks() -> None:
    with pytest.raises(InvalidInputError, match="unknown pooler_config task 'plugin'; known: embed"):
        PoolerConfig(task="plugin")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="a score is computed by embed, token_embed or classify"):
        PoolerConfig.from_value({"task": "score"})


def test_repr_names_the_task_only_when_set() -> None:
    """A tune verdict keys on the repr: a config without a task keeps the key it always had."""
    assert "task" not in repr(PoolerConfig(pooling_type="CLS"))
    assert repr(PoolerConfig(task="token_embed")).endswith("task='token_embed')")


@pytest.mark.parametrize("key", ["normalize", "use_activation", "enable_chunked_processing"])
@pytest.mark.parametrize("value", ["False", "false", 0, 1])
def test_a_switch_given_as_anything_but_a_boolean_is_refused(key: str, value: object) -> None:
    """A non-empty string is true to Python: ``{"normalize": "False"}`` normalised in silence."""
    with pytest.raises(InvalidInputError, match=f"pooler_config {key} must be true or false, got {value!r}"):
        PoolerConfig.from_value({key: value})


@pytest.mark.parametrize(
    ("given", "pooling_type"),
    [("weightedmean", "WEIGHTEDMEAN"), ("MEAN_SQRT_LEN", "MEAN_SQRT_LEN")],
)
def test_sentence_transformers_other_poolings_are_pooling_types(given: str, pooling_type: str) -> None:
    """SGPT's position-weighted mean and sentence-transformers' sum / sqrt(length), as
    ``--pooler-config`` writes them (were "unknown pooling_type")."""
    assert PoolerConfig.from_value(f'{{"pooling_type": "{given}"}}').pooling_type == pooling_type
