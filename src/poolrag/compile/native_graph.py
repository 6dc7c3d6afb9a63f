"""poolrag's BERT-family encoder restated for the compiler: the same math as
:class:`poolrag.models.bert.BertFamilyModel` on packed rows, with attention and the packed linears
as opaque ops (:mod:`poolrag.compile.opaque_ops`), so one graph serves every batch.

The eager module builds a Python attention layout from the batch's lengths before its layers run;
the compiler would specialise on it (a recompile per mix of lengths). Here the layout is built
inside the attention op from ``cu_seq_lens``, and the packed token count is the graph's one
dynamic dimension. Outputs are checked against the eager module before this is ever used.
"""

from __future__ import annotations

import torch
from torch import nn

from poolrag.compile.opaque_ops import linear, onednn_u8s8_linear, packed_attention
from poolrag.config.network_head import NetworkHead
from poolrag.models.bert import BertFamilyModel, FirstTokenClassifier, NativeOutput
from poolrag.models.fused_linear import FusedLinear
from poolrag.models.int8_linear import SmoothQuantLinear


def _fused(
    layer: FusedLinear | SmoothQuantLinear, x: torch.Tensor, residual: torch.Tensor | None = None
) -> torch.Tensor:
    if isinstance(layer, SmoothQuantLinear):  # cpu_fast_mode="int8"
        quantized, scale = layer.quantize(x)
        sums = onednn_u8s8_linear(
            quantized, layer.zero_point, layer.qweight, layer.weight_scale, layer.weight_zero
        )
        return layer.dequantize(sums, scale, residual)
    return linear(layer.packed_weight, layer.linear, x, residual, layer.activation)


class NativePackedGraph(nn.Module):
    """Packed-batch forward of a loaded (and weight-packed) :class:`BertFamilyModel`; shares its tensors."""

    def __init__(self, model: BertFamilyModel) -> None:
        super().__init__()
        self.model = model

    def forward(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor,
        cu_seq_lens: torch.Tensor,
        token_type_ids: torch.Tensor | None,
        first_rows_only: bool,
    ) -> NativeOutput:
        """``input_ids``/``position_ids``/``token_type_ids``: ``[T]``; ``cu_seq_lens``: ``[B + 1]``."""
        model = self.model
        x = model.embeddings(input_ids, position_ids, token_type_ids)
        classifier = model.head_kind is NetworkHead.SEQUENCE
        first_only = first_rows_only or (classifier and model.classifier_first_rows)
        first = cu_seq_lens[:-1].to(torch.int64)
        last = len(model.layers) - 1
        for index, layer in enumerate(model.layers):
            context = packed_attention(_fused(layer.qkv, x), cu_seq_lens, layer.heads)
            if first_only and index == last:
                context, x = context.index_select(0, first), x.index_select(0, first)
            x = layer.attn_norm(_fused(layer.attn_out, context, x))
            x = layer.ffn_norm(_fused(layer.down, _fused(layer.up, x), x))
        if first_only and not model.layers:
            x = x.index_select(0, first)
        if classifier:
            head = model.head
            assert isinstance(head, FirstTokenClassifier)
            rows = x if first_only else x.index_select(0, first)
            return NativeOutput(logits=head.out(torch.tanh(_fused(head.dense, rows))))
        if model.head_kind is NetworkHead.TOKEN:
            assert model.head is not None
            return NativeOutput(logits=model.head(x)[None])
        return NativeOutput(last_hidden_state=x if first_only else x[None])
