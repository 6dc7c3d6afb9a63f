"""vLLM's public pooling names, each the one :class:`poolrag.LLM` takes or returns, so a vLLM script
is ported by changing its vLLM imports: ``from vllm import LLM, PoolingParams, PoolingRequestOutput``,
``from vllm.config import PoolerConfig`` and ``from vllm.pooling_params import LateChunkingParams``
all become ``from poolrag.vllm import ...`` (or ``import poolrag.vllm as vllm``), and ``isinstance``
checks against its output classes hold. vLLM's script helpers (``vllm.utils``: its argument parser,
``print_embeddings``, ``serial_utils``) are no part of that API and are not here (docs/vllm.md says
what replaces them).

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
