"""STEP pooling for process reward models: one score per reasoning step.

A PRM marks the end of each step with a tag token (math-shepherd: ``ки``); the hidden state at
each tag is projected onto a few outputs (the lm_head rows of "+" and "-", or the labels of a
reward head) and softmaxed over those outputs only.
"""

from __future__ import annotations

from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn

from poolrag.errors import InvalidInputError
from poolrag.pooling.heads import on_device_of
from poolrag.pooling.lm_head_rows import softcap


class StepProjection(Protocol):
    @property
    def columns(self) -> int | None:
        """How many columns ``returned_token_ids`` may index (vocabulary rows or labels)."""

    def __call__(self, rows: torch.Tensor, columns: tuple[int, ...] | None) -> torch.Tensor:
        """Logits ``[steps, len(columns)]`` for the hidden states of the step tags."""


class LMHeadStepProjection:
    """The LM head of a ``*ForCausalLM`` PRM, evaluated only on the requested vocabulary rows."""

    def __init__(self, weight: torch.Tensor, final_softcap: float | None = None) -> None:
        self.weight = weight.detach()
        self.final_softcap = final_softcap

    @property
    def columns(self) -> int:
        return int(self.weight.shape[0])

    def __call__(self, rows: torch.Tensor, columns: tuple[int, ...] | None) -> torch.Tensor:
        if not columns:
            raise InvalidInputError(
                "a language-model PRM needs returned_token_ids (e.g. the ids of '+' and '-'); "
                "the full vocabulary is never scored"
            )
        vocab = self.weight.shape[0]
        if any(not 0 <= c < vocab for c in columns):
            raise InvalidInputError(f"returned_token_ids must be in [0, {vocab})")
        head = self.weight[list(columns)].to(device=rows.device, dtype=rows.dtype)
        return softcap(F.linear(rows, head), self.final_softcap)


class ModuleStepProjection:
    """A reward head module (``score``) applied per step, then the requested label columns."""

    def __init__(self, module: nn.Module) -> None:
        self.module = module

    @property
    def columns(self) -> int | None:
        linears = [m for m in self.module.modules() if isinstance(m, nn.Linear)]
        return linears[-1].out_features if linears else None

    def __call__(self, rows: torch.Tensor, columns: tuple[int, ...] | None) -> torch.Tensor:
        logits = self.module(on_device_of(self.module, rows))
        if columns:
            if any(not 0 <= c < logits.shape[-1] for c in columns):
                raise InvalidInputError(
                    f"returned_token_ids must be label indices in [0, {logits.shape[-1]})"
                )
            logits = logits[:, list(columns)]
        return logits
