"""A folder whose architecture only its own code defines (gte-multilingual: ``model_type: "new"``)
names the flag that loads it, instead of transformers' message about an unknown model type."""

from __future__ import annotations

import json

import pytest

from poolrag import Engine
from poolrag.errors import ModelLoadError


def test_gte_new_without_trust_remote_code_names_the_flag(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["NewModel"],
                "model_type": "new",
                "auto_map": {
                    "AutoConfig": "Alibaba-NLP/new-impl--configuration.NewConfig",
                    "AutoModel": "Alibaba-NLP/new-impl--modeling.NewModel",
                },
                "hidden_size": 32,
            }
        )
    )
    with pytest.raises(ModelLoadError, match=r"trust_remote_code=True \(--trust-remote-code\)") as info:
        Engine(tmp_path)
    assert "NewModel" in str(info.value) and "auto_map" in str(info.value)
