"""Variable-length attention for packed batches, plugged in through transformers' attention interface.

A packed batch is one row of ``total_tokens`` with positions restarting at every sequence, so the
linear layers (almost all FLOPs) never touch a padding token. Only attention needs to know where
sequences start: transformers passes our ``cu_seq_lens_*`` keyword arguments down to the
registered attention function, which runs

* on CUDA in fp16/bf16: PyTorch's own flash-attention ``varlen_attn`` (no extra package);
* elsewhere: SDPA over a jagged nested tensor, which PyTorch runs per sequence without padding.

The same registered name serves padded batches too (no ``cu_seq_lens``): it then is plain SDPA with
the usual padding mask, so one model object can run either layout.

We use transformers' interface rather than patching modules so that any architecture whose
attention layers forward ``**kwargs`` (BERT, RoBERTa, Llama, Qwen, ...) gets it unchanged; the
runner verifies on a probe batch that packed equals padded before it trusts a model with it.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F

from poolrag.models.packed_attention import cuda_varlen_attention, pads_attention

ATTENTION_NAME = "poolrag_varlen"

# the CPU path of jagged-tensor SDPA goes through PyTorch's strided nested tensors internally and
# says so once per process; the warning is about that internal call, not about this code
warnings.filterwarnings(
    "ignore", message="The PyTorch API of nested tensors is in prototype", category=UserWarning
)

_state = threading.local()
_registered = False
_register_lock = threading.Lock()


@contextlib.contextmanager
def packed_forward() -> Iterator[None]:
    """Marks the current thread's forward pass as packed, so no O(T²) mask is ever built."""
    _state.packed = True
    try:
        yield
    finally:
        _state.packed = False


def _nested_sdpa(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: torch.Tensor, scale: float | None, causal: bool
) -> torch.Tensor:
    """``[T, H, D]`` packed rows → attention per sequence via jagged nested tensors (any device)."""
    offsets = cu.to(torch.int64)

    def nest(x: torch.Tensor) -> torch.Tensor:
        return torch.nested.nested_tensor_from_jagged(x, offsets).transpose(1, 2)

    out = F.scaled_dot_product_attention(nest(q), nest(k), nest(v), scale=scale, is_causal=causal)
    return out.transpose(1, 2).values()


def varlen_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers attention function: ``query`` is ``[B, H, L, D]``; returns ``[B, L, H, D]``."""
    cu = kwargs.get("cu_seq_lens_q")
    if cu is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(
            module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs
        )
    max_len = int(kwargs.get("max_length_q") or 0)
    causal = bool(getattr(module, "is_causal", False))
    q, k, v = (x[0].transpose(0, 1) for x in (query, key, value))  # [T, H, D]
    if not pads_attention(q.device, q.dtype):
        out = cuda_varlen_attention(q, k, v, cu, max_len, scaling, causal)
    else:
        if k.shape[1] != q.shape[1]:  # grouped-query attention: share each key/value head
            repeat = q.shape[1] // k.shape[1]
            k = k.repeat_interleave(repeat, dim=1)
            v = v.repeat_interleave(repeat, dim=1)
        out = _nested_sdpa(q, k, v, cu, scaling, causal)
    return out.unsqueeze(0), None


def _mask(*args: Any, **kwargs: Any) -> torch.Tensor | None:
    """Padded batches get SDPA's usual mask; packed ones need none (sequences are in ``cu_seq_lens``)."""
    if getattr(_state, "packed", False):
        return None
    from transformers.masking_utils import sdpa_mask

    return sdpa_mask(*args, **kwargs)


def register() -> str:
    """Register the attention function and its mask builder with transformers (once)."""
    global _registered
    with _register_lock:
        if not _registered:
            from transformers import AttentionInterface
            from transformers.masking_utils import AttentionMaskInterface

            AttentionInterface.register(ATTENTION_NAME, varlen_attention_forward)
            AttentionMaskInterface.register(ATTENTION_NAME, _mask)
            _registered = True
    return ATTENTION_NAME
