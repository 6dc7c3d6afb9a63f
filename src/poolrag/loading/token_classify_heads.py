"""An encoder classifier's own head, as a module applied to every token's hidden state.

With ``convert='classify'`` a ``*ForSequenceClassification`` encoder answers ``token_classify``
(vLLM's table): the layers transformers applies after the pooled output, on each token instead of
the pooled one. They are the loaded model's own modules, so no weight is read twice.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter

import torch
from torch import nn

from poolrag.config.registry import TOKEN_CLASSIFY_HEADS
from poolrag.errors import ModelLoadError


class _FirstRowHead(nn.Module):
    """RoBERTa / MPNet heads read ``features[:, 0]``: each token becomes a sequence of one."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.head = model.classifier

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        return self.head(states.unsqueeze(1))


def _distilbert(model: nn.Module) -> nn.Module:
    return nn.Sequential(model.pre_classifier, nn.ReLU(), model.classifier)


_BUILDERS: dict[str, Callable[[nn.Module], nn.Module]] = {
    "bert": attrgetter("classifier"),
    "distilbert": _distilbert,
    "modernbert": attrgetter("classifier"),
    "mpnet": _FirstRowHead,
    "roberta": _FirstRowHead,
    "xlm-roberta": _FirstRowHead,
}
assert set(_BUILDERS) == set(TOKEN_CLASSIFY_HEADS), "every documented family needs a builder"


def token_classify_head(model: nn.Module) -> nn.Module:
    """``[tokens, hidden] -> [tokens, num_labels]`` built from ``model``'s own classifier layers."""
    model_type = getattr(getattr(model, "config", None), "model_type", "")
    build = _BUILDERS.get(model_type)
    if build is None:  # model_kind refuses these at load; a model swapped in later lands here
        raise ModelLoadError(f"no per-token classifier head for model_type {model_type!r}")
    return build(model).eval()
