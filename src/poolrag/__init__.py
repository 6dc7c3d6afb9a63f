"""poolrag: serve pooling models (embedders, rerankers, classifiers, ColBERT, reward models).

The public names are resolved on first use, so ``import poolrag`` (and every ``poolrag`` CLI
``--help``) stays fast: torch and transformers load only when an :class:`Engine` is made.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from poolrag.config.pooler_config import PoolerConfig
    from poolrag.engine import Engine
    from poolrag.errors import (
        DimensionsError,
        InputTooLongError,
        InputTypeError,
        InvalidInputError,
        ModelLoadError,
        PoolragError,
        UnsupportedTaskError,
    )
    from poolrag.llm import LLM
    from poolrag.outputs import (
        ClassificationOutput,
        EmbeddingOutput,
        PoolingOutput,
        PoolingRequestOutput,
        ScoringOutput,
    )
    from poolrag.params import PoolingParams
    from poolrag.postprocess.entities import Entity

# public name -> module that defines it
_EXPORTS = {
    "PoolerConfig": "poolrag.config.pooler_config",
    "Engine": "poolrag.engine",
    "LLM": "poolrag.llm",
    "DimensionsError": "poolrag.errors",
    "InputTooLongError": "poolrag.errors",
    "InputTypeError": "poolrag.errors",
    "InvalidInputError": "poolrag.errors",
    "ModelLoadError": "poolrag.errors",
    "PoolragError": "poolrag.errors",
    "UnsupportedTaskError": "poolrag.errors",
    "ClassificationOutput": "poolrag.outputs",
    "EmbeddingOutput": "poolrag.outputs",
    "PoolingOutput": "poolrag.outputs",
    "PoolingRequestOutput": "poolrag.outputs",
    "ScoringOutput": "poolrag.outputs",
    "PoolingParams": "poolrag.params",
    "Entity": "poolrag.postprocess.entities",
}

__all__ = [
    "LLM",
    "ClassificationOutput",
    "DimensionsError",
    "EmbeddingOutput",
    "Engine",
    "Entity",
    "InputTooLongError",
    "InputTypeError",
    "InvalidInputError",
    "ModelLoadError",
    "PoolerConfig",
    "PoolingOutput",
    "PoolingParams",
    "PoolingRequestOutput",
    "PoolragError",
    "ScoringOutput",
    "UnsupportedTaskError",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'poolrag' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
