"""The documented way for tests to reach the layers under an :class:`~poolrag.engine.Engine`.

The engine keeps its wiring private so that applications and the other doors (server, CLI, ingest,
Ray) depend only on its methods. Tests of one layer (which implementation loaded, whether batches
are packed, what the core queued) still need to probe it; they do so through these functions, so
the one place that knows the wiring's shape, besides the engine, is this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from poolrag.batching.token_budget import TokenBudgetBatcher
    from poolrag.config.model_kind import ModelKind
    from poolrag.core.engine_core import EngineCore
    from poolrag.core.executor import ModelExecutor
    from poolrag.core.model_setup import Pipeline
    from poolrag.engine import Engine
    from poolrag.runner.model_runner import ModelRunner
    from poolrag.tokenization.input_processor import InputProcessor


def pipeline(engine: Engine) -> Pipeline:
    """The wired layers: model kind, input processor, executor (runner, poolers, batcher, core)."""
    return engine._pipeline


def model_kind(engine: Engine) -> ModelKind:
    """Which pipeline the model folder was built into (embedding, cross-encoder, ColBERT, ...)."""
    return engine._pipeline.kind


def processor(engine: Engine) -> InputProcessor:
    """Texts to :class:`~poolrag.request.PoolingRequest` objects, as the engine makes them."""
    return engine._pipeline.processor


def executor(engine: Engine) -> ModelExecutor:
    """Batcher, runner and poolers, driven by the engine core."""
    return engine._pipeline.executor


def runner(engine: Engine) -> ModelRunner:
    """The forward pass over packed or padded batches."""
    return engine._pipeline.executor.runner


def loaded_module(engine: Engine) -> Any:
    """The torch module that runs the forward pass (poolrag's native encoder or a transformers model)."""
    return engine._pipeline.executor.runner.model


def batcher(engine: Engine) -> TokenBudgetBatcher:
    """The token-budget batcher that groups requests into forward passes."""
    return engine._pipeline.executor.batcher


def core(engine: Engine) -> EngineCore:
    """The engine core that queues, batches and cancels requests of every caller."""
    return engine._pipeline.executor.core
