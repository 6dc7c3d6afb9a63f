"""BERT, RoBERTa and XLM-RoBERTa encoders on packed rows, with their classification heads.

The three share one layer layout (post-norm, GELU feed-forward, absolute positions); RoBERTa only
numbers positions from ``pad_token_id + 1`` (packed rows get them from the runner, padded rows here)
and classifies with its own head instead of BERT's pooler. Query,
key and value are one ``[3H, H]`` matmul; the attention output and feed-forward matmuls add the
residual inside the kernel, the up-projection applies GELU inside it (see :mod:`fused_linear`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from poolrag.config.network_head import NetworkHead
from poolrag.config.positions import position_offset
from poolrag.models.fused_linear import FusedLinear, bucket_padding
from poolrag.models.packed_attention import AttentionLayout, packed_self_attention, pads_attention


@dataclass(slots=True)
class NativeOutput:
    """The two fields the runner reads from a transformers output."""

    last_hidden_state: torch.Tensor | None = None
    logits: torch.Tensor | None = None


def _embedding(rows: int, width: int) -> nn.Embedding:
    # an uninitialised table: the checkpoint fills it, and random init on the meta device would
    # import torch's compiler stack (seconds of cold start) for nothing
    return nn.Embedding(rows, width, _weight=torch.empty(rows, width))


class Embeddings(nn.Module):
    def __init__(self, cfg: Any) -> None:
        super().__init__()
        self.word = _embedding(cfg.vocab_size, cfg.hidden_size)
        self.position = _embedding(cfg.max_position_embeddings, cfg.hidden_size)
        self.token_type = _embedding(max(int(cfg.type_vocab_size), 1), cfg.hidden_size)
        self.norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(
        self, ids: torch.Tensor, positions: torch.Tensor, token_types: torch.Tensor | None
    ) -> torch.Tensor:
        x = self.word(ids) + self.position(positions)
        x = x + (self.token_type.weight[0] if token_types is None else self.token_type(token_types))
        return self.norm(x)


class EncoderLayer(nn.Module):
    def __init__(self, cfg: Any) -> None:
        super().__init__()
        hidden = cfg.hidden_size
        self.heads = int(cfg.num_attention_heads)
        self.qkv = FusedLinear(hidden, 3 * hidden)
        self.attn_out = FusedLinear(hidden, hidden)
        self.attn_norm = nn.LayerNorm(hidden, eps=cfg.layer_norm_eps)
        self.up = FusedLinear(hidden, cfg.intermediate_size, "gelu")
        self.down = FusedLinear(cfg.intermediate_size, hidden)
        self.ffn_norm = nn.LayerNorm(hidden, eps=cfg.layer_norm_eps)

    def forward(
        self, x: torch.Tensor, layout: AttentionLayout, keep_rows: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``keep_rows``: compute only these rows after attention (which still reads every key and
        value); everything past attention is per row, so the kept rows come out exactly as before."""
        context = packed_self_attention(self.qkv(x), layout, self.heads)
        if keep_rows is not None:
            context, x = context.index_select(0, keep_rows), x.index_select(0, keep_rows)
        x = self.attn_norm(self.attn_out(context, residual=x))
        return self.ffn_norm(self.down(self.up(x), residual=x))


class FirstTokenClassifier(nn.Module):
    """``out(tanh(dense(first token)))``: BERT's pooler + classifier, RoBERTa's classification head."""

    def __init__(self, hidden: int, labels: int) -> None:
        super().__init__()
        self.dense = FusedLinear(hidden, hidden)
        self.out = nn.Linear(hidden, labels)

    def forward(self, first_tokens: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.dense(first_tokens)))


class BertFamilyModel(nn.Module):
    """Backbone plus the head ``head`` names. Takes the runner's packed or padded keyword arguments."""

    native = True  # the runner packs every batch for it and lets it pack its own weights
    # the head reads the first token only: the last layer computes that row alone (off = the
    # reference that benchmarks and tests compare against)
    classifier_first_rows = True

    def __init__(self, cfg: Any, head: NetworkHead) -> None:
        super().__init__()
        self.config = cfg
        self.head_kind = head
        self.embeddings = Embeddings(cfg)
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.head: nn.Module | None = None
        if head is NetworkHead.SEQUENCE:
            self.head = FirstTokenClassifier(cfg.hidden_size, cfg.num_labels)
        elif head is NetworkHead.TOKEN:
            self.head = nn.Linear(cfg.hidden_size, cfg.num_labels)
        self._position_offset = position_offset(cfg)  # padded rows; packed rows come with position ids
        self._packed_weights = False  # oneDNN matmuls: batches are padded to bucketed row counts

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings.word

    @property
    def attention_shape(self) -> tuple[int, int]:
        """(heads, head dim): what packed CPU attention's runs-or-groups choice is measured for."""
        heads = int(self.config.num_attention_heads)
        return heads, int(self.config.hidden_size) // heads

    def pack_weights(self) -> None:
        """Reorder every matmul weight for oneDNN (CPU): each layer packs, so a sum, not ``any``."""
        self._packed_weights = sum(m.pack() for m in self.modules() if isinstance(m, FusedLinear)) > 0

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        cu_seq_lens_q: torch.Tensor | None = None,
        max_length_q: int | None = None,
        first_rows_only: bool = False,
        **_: Any,
    ) -> NativeOutput:
        """``first_rows_only``: the caller pools the first token only (CLS), so the last layer
        computes that row alone and ``last_hidden_state`` is ``[B, H]``. Sequence classifiers
        always do this: their head reads the first token."""
        shape = input_ids.shape
        pad = 0  # rows of a filler sequence after the packed ones (CPU: oneDNN's per-shape primitives)
        if cu_seq_lens_q is not None:  # packed: one row of all tokens
            varlen = not pads_attention(input_ids.device, self.embeddings.word.weight.dtype)
            lengths = cu_seq_lens_q.diff()
            if input_ids.device.type == "cpu" and self._packed_weights:
                pad = bucket_padding(shape.numel())
            if pad:
                lengths = torch.cat([lengths, lengths.new_tensor([pad])])
                max_length_q = max(max_length_q or 0, pad)
            layout = AttentionLayout.from_lengths(lengths, max_length_q, varlen=varlen)
            first = cu_seq_lens_q[:-1].to(torch.int64)
        else:  # padded [B, W], positions 0..W-1 (+ offset)
            if attention_mask is None:
                attention_mask = torch.ones_like(input_ids)
            layout = AttentionLayout.from_mask(attention_mask)
            if position_ids is None:
                position_ids = torch.arange(shape[1], device=input_ids.device).expand(shape)
                position_ids = position_ids + self._position_offset
            first = torch.arange(0, shape.numel(), shape[1], device=input_ids.device)
        assert position_ids is not None, "packed batches carry their position ids"
        types = None if token_type_ids is None else token_type_ids.reshape(-1)
        x = self.embeddings(input_ids.reshape(-1), position_ids.reshape(-1), types)
        if pad:
            x = torch.cat([x, x.new_zeros(pad, x.shape[1])])
        classifier = self.head_kind is NetworkHead.SEQUENCE
        first_only = first_rows_only or (classifier and self.classifier_first_rows)
        last = len(self.layers) - 1
        for index, layer in enumerate(self.layers):
            x = layer(x, layout, first if first_only and index == last else None)
        if first_only and not self.layers:
            x = x.index_select(0, first)
        elif pad and not first_only:
            x = x[: shape.numel()]
        if classifier:
            assert self.head is not None
            return NativeOutput(logits=self.head(x if first_only else x.index_select(0, first)))
        if self.head_kind is NetworkHead.TOKEN:
            assert self.head is not None
            return NativeOutput(logits=self.head(x).view(*shape, -1))
        if first_only:
            return NativeOutput(last_hidden_state=x)
        return NativeOutput(last_hidden_state=x.view(*shape, -1))


# -- checkpoint names → ours --------------------------------------------------------------------------
_PREFIXES = ("bert.", "roberta.", "model.")
_LAYER = re.compile(r"^encoder\.layer\.(\d+)\.(.+)$")
_LAYER_NAMES = {
    "attention.output.dense": "attn_out.linear",
    "attention.output.LayerNorm": "attn_norm",
    "intermediate.dense": "up.linear",
    "output.dense": "down.linear",
    "output.LayerNorm": "ffn_norm",
}
_TOP_NAMES = {
    "embeddings.word_embeddings": "embeddings.word",
    "embeddings.position_embeddings": "embeddings.position",
    "embeddings.token_type_embeddings": "embeddings.token_type",
    "embeddings.LayerNorm": "embeddings.norm",
}
_SEQUENCE_HEADS = {
    # BERT: the pooler (dense + tanh on [CLS]) feeds the classifier
    "bert": {"pooler.dense": "head.dense.linear", "classifier": "head.out"},
    # RoBERTa family: its own classification head; an old checkpoint's pooler is unused, as in transformers
    "roberta": {"classifier.dense": "head.dense.linear", "classifier.out_proj": "head.out"},
}
_QKV = re.compile(r"^attention\.self\.(query|key|value)\.(weight|bias)$")


def _split_param(name: str) -> tuple[str, str]:
    module, _, param = name.rpartition(".")
    return module, {"gamma": "weight", "beta": "bias"}.get(param, param)


def head_names(model_type: str, head: NetworkHead) -> dict[str, str]:
    """Checkpoint module names of ``head`` → ours."""
    if head is NetworkHead.SEQUENCE:
        return _SEQUENCE_HEADS["bert" if model_type == "bert" else "roberta"]
    if head is NetworkHead.TOKEN:
        return {"classifier": "head"}
    return {}


def convert_checkpoint(
    raw: Mapping[str, torch.Tensor], head: NetworkHead, model_type: str = "bert"
) -> dict[str, torch.Tensor]:
    """A transformers BERT/RoBERTa state dict → this module's names (query/key/value fused).

    Raises ``ValueError`` when two checkpoint tensors would land on one parameter: silently keeping
    either would give wrong outputs.
    """
    out = _Renamed()
    qkv: dict[tuple[str, str], dict[str, torch.Tensor]] = {}
    heads = head_names(model_type, head)
    for key, tensor in raw.items():
        # the base model's prefix dropped (a head's modules have none)
        name = next((key[len(prefix) :] for prefix in _PREFIXES if key.startswith(prefix)), key)
        module, param = _split_param(name)
        if module in _TOP_NAMES:
            out[f"{_TOP_NAMES[module]}.{param}"] = tensor
        elif module in heads:
            out[f"{heads[module]}.{param}"] = tensor
        elif (match := _LAYER.match(f"{module}.{param}")) is not None:
            index, rest = match.groups()
            if (fused := _QKV.match(rest)) is not None:
                qkv.setdefault((index, fused.group(2)), {})[fused.group(1)] = tensor
                continue
            inner, param = rest.rsplit(".", 1)
            if inner in _LAYER_NAMES:
                out[f"layers.{index}.{_LAYER_NAMES[inner]}.{param}"] = tensor
    for (index, param), parts in qkv.items():
        if len(parts) == 3:
            out[f"layers.{index}.qkv.linear.{param}"] = torch.cat(
                [parts["query"], parts["key"], parts["value"]]
            )
    return dict(out)


class _Renamed(dict[str, torch.Tensor]):
    """A dict that refuses a second tensor for the same name."""

    def __setitem__(self, name: str, tensor: torch.Tensor) -> None:
        if name in self:
            raise ValueError(f"two checkpoint tensors map to {name}")
        super().__setitem__(name, tensor)
