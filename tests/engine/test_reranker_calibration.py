"""vLLM's ``logit_mean`` / ``logit_sigma`` pooler options: a reranker's score becomes
sigmoid((logit - mean) / sigma) of the reference cross-encoder's raw logit; unset, nothing changes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sentence_transformers import CrossEncoder

from poolrag import Engine, EngineArgs, InvalidInputError, PoolerConfig, PoolingParams
from poolrag.testing.tiny_models import SENTENCES

QUERY = "what do pooling models do?"


@pytest.fixture(scope="module")
def reranker(tiny_model):
    return tiny_model("bert", head="sequence", num_labels=1)


def _raw_logits(folder) -> np.ndarray:
    model = CrossEncoder(str(folder), device="cpu")
    return model.predict([(QUERY, d) for d in SENTENCES], activation_fn=torch.nn.Identity())


def test_scores_are_the_sigmoid_of_the_calibrated_raw_logit(reranker) -> None:
    args = EngineArgs(model=str(reranker), pooler_config={"logit_mean": 0.3, "logit_sigma": 2.5})
    engine = Engine.from_engine_args(args)
    scores = [out.outputs.score for out in engine.score(QUERY, SENTENCES)]
    expected = 1 / (1 + np.exp(-(_raw_logits(reranker) - 0.3) / 2.5))
    np.testing.assert_allclose(scores, expected, atol=1e-5)
    raw = engine.score(QUERY, SENTENCES, PoolingParams(use_activation=False))
    np.testing.assert_allclose(
        [out.outputs.score for out in raw], (_raw_logits(reranker) - 0.3) / 2.5, atol=1e-5
    )


def test_the_json_pooler_config_vllm_takes_works_the_same_as_an_engine_keyword(reranker) -> None:
    engine = Engine(reranker, pooler_config='{"logit_sigma": 4.0}')
    scores = [out.outputs.score for out in engine.score(QUERY, SENTENCES)]
    np.testing.assert_allclose(scores, 1 / (1 + np.exp(-_raw_logits(reranker) / 4.0)), atol=1e-5)


def test_without_calibration_scores_are_the_cross_encoders(reranker) -> None:
    scores = [out.outputs.score for out in Engine(reranker).score(QUERY, SENTENCES)]
    reference = CrossEncoder(str(reranker), device="cpu").predict([(QUERY, d) for d in SENTENCES])
    np.testing.assert_allclose(scores, reference, atol=1e-5)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"logit_sigma": 0}, "logit_sigma must be greater than 0, got 0"),
        ({"logit_sigma": -1.5}, "logit_sigma must be greater than 0, got -1.5"),
        ({"logit_mean": float("nan")}, "logit_mean must be a finite number, got nan"),
        ({"logit_sigma": float("inf")}, "logit_sigma must be a finite number, got inf"),
        ({"logit_mean": "1"}, "logit_mean must be a finite number, got '1'"),
    ],
)
def test_bad_calibration_is_one_line_naming_the_option(config, message) -> None:
    with pytest.raises(InvalidInputError, match=message):
        PoolerConfig.from_value(config)
