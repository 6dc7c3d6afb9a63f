"""Tiny model folders that ship their own modeling code (loaded with ``trust_remote_code``).

Modelled on the published layouts: Qwen2.5-Math-RM (``Qwen2ForRewardModel``: Qwen2 backbone +
Linear-ReLU-Linear head read at the last token), Qwen2.5-Math-PRM (the same head with two labels,
per token), InternLM2's reward models (``InternLM2ForRewardModel``: the head in ``v_head``, read at
the last attended token) and NVIDIA's bidirectional Llama rerankers (causal mask removed, mean
pooling, linear ``score``), none of which transformers ships itself.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import torch
import transformers

QWEN2_RM_CONFIG = """
from transformers import Qwen2Config


class Qwen2RMConfig(Qwen2Config):
    model_type = "qwen2"
"""

QWEN2_RM_MODELING = """
import torch
from torch import nn
from transformers import Qwen2Model, Qwen2PreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutputWithPast, TokenClassifierOutput

from .configuration_qwen2_rm import Qwen2RMConfig


def _head(config, labels):
    return nn.Sequential(
        nn.Linear(config.hidden_size, config.hidden_size), nn.ReLU(), nn.Linear(config.hidden_size, labels)
    )


class Qwen2ForRewardModel(Qwen2PreTrainedModel):
    config_class = Qwen2RMConfig

    def __init__(self, config):
        super().__init__(config)
        self.model = Qwen2Model(config)
        self.score = _head(config, 1)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, **kwargs):
        output = self.model(input_ids, attention_mask=attention_mask, position_ids=position_ids)
        hidden = output.last_hidden_state
        logits = self.score(hidden)
        not_pad = (input_ids != self.config.pad_token_id).int()
        last = (torch.arange(input_ids.shape[1]) * not_pad).argmax(-1)
        return SequenceClassifierOutputWithPast(logits=logits[torch.arange(input_ids.shape[0]), last])


class Qwen2ForProcessRewardModel(Qwen2PreTrainedModel):
    config_class = Qwen2RMConfig

    def __init__(self, config):
        super().__init__(config)
        self.model = Qwen2Model(config)
        self.score = _head(config, 2)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, **kwargs):
        output = self.model(input_ids, attention_mask=attention_mask, position_ids=position_ids)
        hidden = output.last_hidden_state
        return TokenClassifierOutput(logits=self.score(hidden))
"""

INTERNLM2_RM_CONFIG = """
from transformers import LlamaConfig


class InternLM2Config(LlamaConfig):
    model_type = "internlm2"
"""

# A Llama backbone stands in for InternLM2's (same computation, other weight names); what
# matters here is the published head: ``v_head`` on every token, read at the last attended one.
INTERNLM2_RM_MODELING = """
import torch
from torch import nn
from transformers import LlamaModel, LlamaPreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutputWithPast

from .configuration_internlm2 import InternLM2Config


class InternLM2ForRewardModel(LlamaPreTrainedModel):
    config_class = InternLM2Config

    def __init__(self, config):
        super().__init__(config)
        self.model = LlamaModel(config)
        self.v_head = nn.Linear(config.hidden_size, 1, bias=False)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, **kwargs):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        hidden = self.model(input_ids, attention_mask=attention_mask, position_ids=position_ids)[0]
        rewards = self.v_head(hidden).squeeze(-1)
        ends = attention_mask.cumsum(dim=1).argmax(dim=1).view(-1, 1)
        return SequenceClassifierOutputWithPast(logits=torch.gather(rewards, 1, ends))
"""

BIDIRECTIONAL_CONFIG = """
from transformers import LlamaConfig


class LlamaBidirectionalConfig(LlamaConfig):
    model_type = "llama_bidirec"

    def __init__(self, pooling="avg", **kwargs):
        self.pooling = pooling
        super().__init__(**kwargs)
"""

BIDIRECTIONAL_MODELING = """
import torch
from torch import nn
from transformers import LlamaModel, LlamaPreTrainedModel
from transformers.masking_utils import create_bidirectional_mask
from transformers.modeling_outputs import BaseModelOutputWithPast, SequenceClassifierOutput

from .configuration_llama_bidirectional import LlamaBidirectionalConfig


class LlamaBidirectionalModel(LlamaModel):
    config_class = LlamaBidirectionalConfig

    def __init__(self, config):
        super().__init__(config)
        for layer in self.layers:
            layer.self_attn.is_causal = False

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, **kwargs):
        embeds = self.embed_tokens(input_ids)
        if position_ids is None:
            position_ids = torch.arange(embeds.shape[1], device=embeds.device)[None]
        mask = create_bidirectional_mask(self.config, embeds, attention_mask)
        hidden = embeds
        rotary = self.rotary_emb(hidden, position_ids=position_ids)
        for layer in self.layers:
            hidden = layer(hidden, attention_mask=mask, position_embeddings=rotary, position_ids=position_ids)
        return BaseModelOutputWithPast(last_hidden_state=self.norm(hidden))


class LlamaBidirectionalForSequenceClassification(LlamaPreTrainedModel):
    config_class = LlamaBidirectionalConfig

    def __init__(self, config):
        super().__init__(config)
        self.model = LlamaBidirectionalModel(config)
        self.score = nn.Linear(config.hidden_size, config.num_labels, bias=False)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, **kwargs):
        output = self.model(input_ids, attention_mask=attention_mask, position_ids=position_ids)
        hidden = output.last_hidden_state
        weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * weights).sum(1) / weights.sum(1)
        return SequenceClassifierOutput(logits=self.score(pooled))
"""


def _write_code(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, source in files.items():
        (folder / name).write_text(textwrap.dedent(source).lstrip())


def _instantiate(folder: Path, config_values: dict, auto_map: dict[str, str], head_class: type):
    """Write config.json with ``auto_map``, build the remote class at random and save its weights."""
    (folder / "config.json").write_text(json.dumps({**config_values, "auto_map": auto_map}))
    config = transformers.AutoConfig.from_pretrained(folder, trust_remote_code=True)
    torch.manual_seed(0)
    model = head_class.from_config(config, trust_remote_code=True).eval()
    model.save_pretrained(folder)
    return model


def qwen2_reward_model(folder: Path, config_values: dict, process: bool = False):
    """A ``Qwen2ForRewardModel`` (or ``Qwen2ForProcessRewardModel``) folder registered as AutoModel."""
    _write_code(
        folder, {"configuration_qwen2_rm.py": QWEN2_RM_CONFIG, "modeling_qwen2_rm.py": QWEN2_RM_MODELING}
    )
    arch = "Qwen2ForProcessRewardModel" if process else "Qwen2ForRewardModel"
    values = {**config_values, "model_type": "qwen2", "architectures": [arch]}
    auto_map = {
        "AutoConfig": "configuration_qwen2_rm.Qwen2RMConfig",
        "AutoModel": f"modeling_qwen2_rm.{arch}",
    }
    return _instantiate(folder, values, auto_map, transformers.AutoModel)


def internlm2_reward_model(folder: Path, config_values: dict):
    """An ``InternLM2ForRewardModel`` folder (head in ``v_head``) registered as AutoModel."""
    _write_code(
        folder,
        {"configuration_internlm2.py": INTERNLM2_RM_CONFIG, "modeling_internlm2.py": INTERNLM2_RM_MODELING},
    )
    values = {**config_values, "model_type": "internlm2", "architectures": ["InternLM2ForRewardModel"]}
    auto_map = {
        "AutoConfig": "configuration_internlm2.InternLM2Config",
        "AutoModel": "modeling_internlm2.InternLM2ForRewardModel",
    }
    return _instantiate(folder, values, auto_map, transformers.AutoModel)


def llama_bidirectional_reranker(folder: Path, config_values: dict):
    _write_code(
        folder,
        {
            "configuration_llama_bidirectional.py": BIDIRECTIONAL_CONFIG,
            "modeling_llama_bidirectional.py": BIDIRECTIONAL_MODELING,
        },
    )
    values = {
        **config_values,
        "model_type": "llama_bidirec",
        "architectures": ["LlamaBidirectionalForSequenceClassification"],
        "num_labels": 1,
    }
    module = "modeling_llama_bidirectional"
    auto_map = {
        "AutoConfig": "configuration_llama_bidirectional.LlamaBidirectionalConfig",
        "AutoModel": f"{module}.LlamaBidirectionalModel",
        "AutoModelForSequenceClassification": f"{module}.LlamaBidirectionalForSequenceClassification",
    }
    return _instantiate(folder, values, auto_map, transformers.AutoModelForSequenceClassification)
