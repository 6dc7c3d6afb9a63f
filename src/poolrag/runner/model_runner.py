"""Run a transformers module on a batch of :class:`PoolingRequest` objects.

Sequences are right-padded here (positions stay 0..n-1, exact for encoders and causal decoders
alike) and unpadded again straight after the forward pass, so nothing downstream sees padding.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import torch
from transformers import PreTrainedModel

from poolrag.config.model_kind import ModelKind
from poolrag.request import PoolingRequest
from poolrag.runner.forward_output import ForwardOutput, PackedStates


class ModelRunner:
    def __init__(
        self, model: PreTrainedModel, kind: ModelKind, pad_token_id: int, device: torch.device
    ) -> None:
        self.model = model
        self.kind = kind
        self.pad_token_id = pad_token_id
        self.device = device
        accepted = inspect.signature(model.forward).parameters
        self._takes_token_types = "token_type_ids" in accepted

    def _tensors(self, batch: Sequence[PoolingRequest]) -> dict[str, torch.Tensor]:
        width = max(r.num_tokens for r in batch)
        ids = torch.full((len(batch), width), self.pad_token_id, dtype=torch.long)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        # only when the tokenizer made them: GPT-2 accepts token_type_ids but adds embeddings for them
        with_types = self._takes_token_types and any(r.token_type_ids is not None for r in batch)
        types = torch.zeros((len(batch), width), dtype=torch.long) if with_types else None
        for row, req in enumerate(batch):
            n = req.num_tokens
            ids[row, :n] = torch.tensor(req.token_ids, dtype=torch.long)
            if req.attention is None:
                attention[row, :n] = 1
            else:
                attention[row, :n] = torch.tensor(req.attention, dtype=torch.long)
            if types is not None and req.token_type_ids is not None:
                types[row, :n] = torch.tensor(req.token_type_ids, dtype=torch.long)
        tensors = {"input_ids": ids, "attention_mask": attention}
        if types is not None:
            tensors["token_type_ids"] = types
        return {k: v.to(self.device, non_blocking=True) for k, v in tensors.items()}

    @torch.inference_mode()
    def forward(self, batch: Sequence[PoolingRequest]) -> ForwardOutput:
        inputs = self._tensors(batch)
        lengths = torch.tensor([r.num_tokens for r in batch], dtype=torch.long, device=self.device)
        width = inputs["input_ids"].shape[1]
        keep = torch.arange(width, device=self.device)[None, :] < lengths[:, None]
        output = self.model(**inputs)
        if self.kind is ModelKind.SEQUENCE_CLASSIFIER:
            return ForwardOutput(sequences=output.logits)
        states = output.logits if self.kind is ModelKind.TOKEN_CLASSIFIER else output.last_hidden_state
        return ForwardOutput(
            tokens=PackedStates(states=states[keep], lengths=lengths, token_ids=inputs["input_ids"][keep])
        )
