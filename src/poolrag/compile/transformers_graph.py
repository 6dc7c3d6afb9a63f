"""A transformers module prepared for the compiler: a structural copy that shares every tensor
with the eager module, its oneDNN-packed linears calling the opaque op (inductor cannot lower
packed weights it did not freeze itself). Padded batches; batch size and width are dynamic.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from poolrag.compile.opaque_ops import linear
from poolrag.loading.cpu_fast_mode import PackedLinear


class _OpaquePackedLinear(nn.Module):
    """:class:`PackedLinear`'s math through the opaque op; holds the same tensors."""

    def __init__(self, packed: PackedLinear) -> None:
        super().__init__()
        self.packed_weight = packed.packed_weight
        self.plain = nn.Linear(
            packed.in_features, packed.out_features, bias=packed.bias is not None, device="meta"
        )
        self.plain.bias = None if packed.bias is None else nn.Parameter(packed.bias, requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(self.packed_weight, self.plain, x)


def compilable_copy(model: nn.Module) -> nn.Module:
    """The module tree copied, tensors shared, packed linears swapped for the opaque op."""
    shared = {id(t): t for t in (*model.parameters(), *model.buffers())}
    twin = copy.deepcopy(model, memo=shared)
    for parent in list(twin.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, PackedLinear):
                setattr(parent, name, _OpaquePackedLinear(child))
    return twin
