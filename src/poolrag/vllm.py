"""vLLM's public names for pooling, each the one :class:`poolrag.LLM` takes or returns, so a vLLM
script is ported by one import: ``from vllm import LLM, PoolingParams, PoolingRequestOutput`` becomes
``from poolrag.vllm import ...`` (or ``import poolrag.vllm as vllm``), and ``isinstance`` checks
against its output classes hold.

``poolrag``'s own top-level ``PoolingRequestOutput``, ``EmbeddingOutput``, ... are the Engine's
numpy types; these are vLLM's (lists of floats, tensors).
"""

from __future__ import annotations

from poolrag.config.pooler_config import PoolerConfig
from poolrag.engine_args import EngineArgs
from poolrag.llm import LLM
from poolrag.params import LateChunkingParams, PoolingParams
from poolrag.vllm_inputs import PromptType, TextPrompt, TokensPrompt
from poolrag.vllm_outputs import (
    ClassificationOutput,
    ClassificationRequestOutput,
    EmbeddingOutput,
    EmbeddingRequestOutput,
    LateChunk,
    LateChunkingMetadata,
    PoolingOutput,
    PoolingRequestOutput,
    ScoringOutput,
    ScoringRequestOutput,
)

__all__ = [
    "LLM",
    "ClassificationOutput",
    "ClassificationRequestOutput",
    "EmbeddingOutput",
    "EmbeddingRequestOutput",
    "EngineArgs",
    "LateChunk",
    "LateChunkingMetadata",
    "LateChunkingParams",
    "PoolerConfig",
    "PoolingOutput",
    "PoolingParams",
    "PoolingRequestOutput",
    "PromptType",
    "ScoringOutput",
    "ScoringRequestOutput",
    "TextPrompt",
    "TokensPrompt",
]
