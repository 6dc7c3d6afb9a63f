"""What ``Engine.score`` takes on each path: a cross-encoder reads each pair jointly (through a score
template where given), a similarity model embeds each side (``input_type`` naming text_1's role)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from poolrag import Engine, InvalidInputError, PoolingParams

QUERY = "what is a panda?"
DOCS = ["The giant panda is a bear native to China.", "Paris is the capital of France."]


@pytest.fixture(scope="module")
def cross_encoder(tiny_model: Callable[..., Path]) -> Engine:
    return Engine(tiny_model("bert", head="sequence", num_labels=1))


def _scores(outputs: list[Any]) -> list[float]:
    return [out.outputs.score for out in outputs]


def test_template_variables_fill_a_cross_encoders_score_template(cross_encoder: Engine) -> None:
    template = "{{ instruction }}: {{ query }} | {{ document }}"
    filled = cross_encoder.score(
        QUERY, DOCS, score_template=template, template_variables={"instruction": "Rank"}
    )
    written = cross_encoder.score(QUERY, DOCS, score_template="Rank: {{ query }} | {{ document }}")
    np.testing.assert_allclose(_scores(filled), _scores(written), rtol=1e-6)
    assert [out.prompt_token_ids for out in filled] == [out.prompt_token_ids for out in written]


def test_template_variables_without_a_template_are_refused(
    cross_encoder: Engine, minilm_engine: Engine
) -> None:
    for engine in (cross_encoder, minilm_engine):
        with pytest.raises(InvalidInputError, match="template variables") as refused:
            engine.score(QUERY, DOCS, template_variables={"instruction": "Rank"})
        assert refused.value.param == "chat_template_kwargs"


def test_a_score_template_on_a_similarity_model_is_refused(minilm_engine: Engine) -> None:
    with pytest.raises(InvalidInputError, match="score templates format pairs for cross-encoders"):
        minilm_engine.score(QUERY, DOCS, score_template="{{ query }} | {{ document }}")


def test_no_pairs_score_to_no_outputs_on_either_path(cross_encoder: Engine, minilm_engine: Engine) -> None:
    assert cross_encoder.score([], []) == []
    assert minilm_engine.score([], []) == []


def test_a_similarity_scores_input_type_names_text_1_the_query(minilm_engine: Engine) -> None:
    roles = minilm_engine.score(QUERY, DOCS, PoolingParams(input_type="query"))
    query = minilm_engine.embed_array([QUERY], PoolingParams(input_type="query"))[0]
    docs = minilm_engine.embed_array(DOCS, PoolingParams(input_type="document"))
    np.testing.assert_allclose(_scores(roles), docs @ query, rtol=1e-5, atol=1e-6)
    with pytest.raises(InvalidInputError, match="names text_1's role") as refused:
        minilm_engine.score(QUERY, DOCS, PoolingParams(input_type="document"))
    assert refused.value.param == "input_type"


def test_a_cross_encoder_reads_pairs_whatever_the_input_type(cross_encoder: Engine) -> None:
    plain = cross_encoder.score(QUERY, DOCS)
    for input_type in ("query", "document"):
        typed = cross_encoder.score(QUERY, DOCS, PoolingParams(input_type=input_type))
        np.testing.assert_allclose(_scores(typed), _scores(plain), rtol=1e-6)
