"""Refusals of ``detect_model_kind`` that no tiny model on disk reaches: a spec says them alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import BertConfig

from poolrag.config.model_kind import detect_model_kind
from poolrag.config.model_spec import ModelSpec, SpladeSpec
from poolrag.config.pooler_config import PoolerConfig
from poolrag.config.registry import Role
from poolrag.errors import ModelLoadError


def _spec(architecture: str, role: Role = Role.BACKBONE, **fields: object) -> ModelSpec:
    folder = Path("/nowhere")
    return ModelSpec(
        path=folder,
        transformer_path=folder,
        hf_config=BertConfig(),
        architecture=architecture,
        pooler_defaults=PoolerConfig(),
        role=role,
        **fields,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("role", "inputs"),
    [(Role.DUAL_ENCODER, "texts and images"), (Role.PAGE_RETRIEVER, "queries and pages")],
)
def test_a_model_that_embeds_as_it_is_refuses_convert(role: Role, inputs: str) -> None:
    with pytest.raises(
        ModelLoadError, match=f"^Tower embeds {inputs} as it is; convert='embed' does not apply$"
    ):
        detect_model_kind(_spec("Tower", role, convert="embed"))


def test_splade_pooling_of_a_model_without_a_masked_lm_head_is_refused() -> None:
    with pytest.raises(ModelLoadError, match=r"^SPLADE pooling reads a masked-LM head; BertModel is not"):
        detect_model_kind(_spec("BertModel", splade=SpladeSpec()))


def test_splade_pooling_is_refused_before_convert() -> None:
    with pytest.raises(ModelLoadError, match=r"^SPLADE pooling"):
        detect_model_kind(_spec("BertModel", convert="embed"), PoolerConfig(pooling_type="SPLADE"))


def test_convert_reward_of_a_model_without_a_language_model_head_is_refused() -> None:
    with pytest.raises(
        ModelLoadError, match=r"^convert='reward' needs a \*ForCausalLM checkpoint, not BertModel$"
    ):
        detect_model_kind(_spec("BertModel", convert="reward"))
