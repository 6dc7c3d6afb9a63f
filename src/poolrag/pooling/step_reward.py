"""STEP pooling for process reward models: one score per reasoning step.

A PRM marks the end of each step with a tag token (math-shepherd: ``ки``); the hidden state at
each tag is projected onto a few outputs (the lm_head rows of "+" and "-", or the labels of a
reward head) and softmaxed over those outputs only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from poolrag.errors import InvalidInputError
from poolrag.pooling.heads import ActivationName, activate, to_numpy
from poolrag.pooling.lm_head_rows import softcap
from poolrag.request import PoolingRequest


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
        param = next(self.module.parameters(), None)
        if param is not None and param.device != rows.device:
            rows = rows.to(param.device)
        logits = self.module(rows)
        if columns:
            if any(not 0 <= c < logits.shape[-1] for c in columns):
                raise InvalidInputError(
                    f"returned_token_ids must be label indices in [0, {logits.shape[-1]})"
                )
            logits = logits[:, list(columns)]
        return logits


class StepRewardHead:
    """Rows at ``step_tag_id`` (every row when unset) → projection → softmax over the columns."""

    def __init__(self, projection: StepProjection, activation: ActivationName = "softmax") -> None:
        self.projection = projection
        self.activation = activation

    @torch.inference_mode()  # the states come from inference mode: no head may track gradients on them
    def __call__(
        self,
        states: torch.Tensor,
        token_ids: torch.Tensor,
        lengths: list[int],
        requests: Sequence[PoolingRequest],
    ) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for rows, ids, req in zip(
            torch.split(states, lengths), torch.split(token_ids, lengths), requests, strict=True
        ):
            params = req.params
            if params.step_tag_id is not None:
                rows = rows[ids == params.step_tag_id]
            logits = self.projection(rows, params.returned_token_ids)
            out.append(to_numpy(activate(logits, self.activation) if params.use_activation else logits))
        return out
