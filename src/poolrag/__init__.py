"""poolrag: serve pooling models (embedders, rerankers, classifiers, ColBERT, reward models).

The public names are resolved on first use, so ``import poolrag`` (and every ``poolrag`` CLI
``--help``) stays fast: torch and transformers load only when an :class:`Engine` is made.

Layers, bottom to top. A module imports only from its own package and from the lines above
its own; names on one line are peers and do not import each other either. Data flows one way:
a lower layer that needs something from above receives it (a protocol from the foundation,
such as :class:`poolrag.backend.PoolingBackend`, or a callable) instead of importing it. Every
``import`` counts, at module level, inside a function, or under ``if TYPE_CHECKING:`` (a type
named from above is still an arrow up). ``tests/test_import_layers.py`` walks the import graph
against this list and fails on any arrow up and on any module not placed here::

    errors: the exception types every layer raises
    fork_holds: locks a fork waits for, so that a forked worker never starts with one held
    counts: the one rule for a count a caller passes (k, limit, top_n, batch sizes)
    text_validity: which texts a model can read (the one rule every front door applies)
    printable: text from data made safe to show on a terminal (control and bidi characters escaped)
    image_inputs: which inputs are images (a PIL image, bytes, a path, a data URL), told without Pillow
    prompt_inputs: what a task method takes as one input (a text, a token prompt, an image), as types
    pdfium_process: pdfium in a child process with bounded memory and time (PDF pages read and drawn)
    loop_work: the one rule of what an event loop does itself and what it hands to a thread
    input_shapes: one prompt or many, score pairs 1:1, 1:N, N:N (the engine's and the client's rule)
    cache_location: where poolrag keeps its files on disk ($POOLRAG_CACHE_DIR, XDG)
    lock_holders: which process holds a lock on a file (the cache's and stores' "in use" errors)
    file_lock: an exclusive lock on a file that no holder outlives (ingest runs, shards, measuring)
    cpu_budget: the CPUs this process may use (its affinity mask cut to a container's CPU quota)
    native_heap: glibc's allocator tuned for long runs (free pages given back after batches)
    worker_threads: each of N processes' share of the CPUs as torch threads (serve and tune --workers)
    loaded_objects: what loading made, left out of Python's cyclic collections in long runs
    model_facts: what a served model is (identity, tasks, sizes, score kind)
    request: the unit of work (token ids and parameters complete for one task)
    params, outputs: what a caller asks for (verified and filled into a request's) and gets back
    vllm_inputs, vllm_outputs, vllm_options: vLLM's input spellings, output types, no-effect options
    backend: the PoolingBackend protocol that the engine and the HTTP client implement
    config: reading a model folder into a spec (family, kind, pooler settings, positions), option choices
    tokenization: text to token ids (prompts, score templates)
    batching: grouping requests into token-budgeted batches
    models: poolrag's own torch modules for the common encoder families
    loading: getting weights onto a device (native or transformers, dtype, placement, CPU mode)
    runner: one forward pass over a batch of packed rows
    compile: the runner's forward compiled by inductor in the background, cached on disk
    pooling, scoring, sparse, postprocess: turning hidden states into vectors, scores and entities
    engine_args: every option an Engine takes, as one checked value (flags, Ray recipes, adapters)
    core: wiring model, runner and poolers into one pipeline
    engine: the in-process Engine (the PoolingBackend most callers use)
    vllm_progress: vLLM's use_tqdm bar, advanced by the core's reports of a call's answered requests
    llm: vLLM's LLM front door over the Engine
    vllm: vLLM's public pooling names (LLM, PoolingParams, PoolerConfig, its output types) for ported scripts
    poolrag: this facade (lazy public names, the version)
    client: the HTTP PoolingBackend for a remote ``poolrag serve``
    cache: embeddings cached on disk around any PoolingBackend
    stores: vector databases (Milvus, Qdrant, qdrant-edge)
    retrieval: search, ColBERT and rerank funnels over stores and a backend
    frameworks: plumbing shared by the LangChain and LlamaIndex partner packages
    ingest: files to chunks to vectors to a store, resumable
    evaluation: retrieval quality on BEIR-style datasets
    server: the OpenAI/vLLM-compatible HTTP server
    scaleout: ingestion and serving replicas on a Ray cluster
    cli: the ``poolrag`` command
    __main__: ``python -m poolrag``, the same command
    testing: test helpers shipped with poolrag (tiny models, live servers, fixtures, the engine's wiring)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from poolrag.config.pooler_config import PoolerConfig
    from poolrag.engine import Engine
    from poolrag.engine_args import EngineArgs
    from poolrag.errors import (
        DimensionsError,
        EngineClosedError,
        InputTooLongError,
        InputTypeError,
        InvalidInputError,
        ModelLoadError,
        OutOfMemoryError,
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
    from poolrag.postprocess.quantization_ranges import QuantizationRanges
    from poolrag.postprocess.vector_precision import quantize_vectors
    from poolrag.vllm_inputs import PromptType, TextPrompt, TokensPrompt
    from poolrag.vllm_outputs import ClassificationRequestOutput, EmbeddingRequestOutput, ScoringRequestOutput

# public name -> module that defines it
_EXPORTS = {
    "PoolerConfig": "poolrag.config.pooler_config",
    "Engine": "poolrag.engine",
    "EngineArgs": "poolrag.engine_args",
    "LLM": "poolrag.llm",
    "DimensionsError": "poolrag.errors",
    "EngineClosedError": "poolrag.errors",
    "InputTooLongError": "poolrag.errors",
    "InputTypeError": "poolrag.errors",
    "InvalidInputError": "poolrag.errors",
    "ModelLoadError": "poolrag.errors",
    "OutOfMemoryError": "poolrag.errors",
    "PoolragError": "poolrag.errors",
    "UnsupportedTaskError": "poolrag.errors",
    "ClassificationOutput": "poolrag.outputs",
    "EmbeddingOutput": "poolrag.outputs",
    "PoolingOutput": "poolrag.outputs",
    "PoolingRequestOutput": "poolrag.outputs",
    "ScoringOutput": "poolrag.outputs",
    "PoolingParams": "poolrag.params",
    "Entity": "poolrag.postprocess.entities",
    "QuantizationRanges": "poolrag.postprocess.quantization_ranges",
    "quantize_vectors": "poolrag.postprocess.vector_precision",
    # what poolrag.LLM returns, under vLLM's names (its PoolingRequestOutput: poolrag.llm's)
    "ClassificationRequestOutput": "poolrag.vllm_outputs",
    "EmbeddingRequestOutput": "poolrag.vllm_outputs",
    "ScoringRequestOutput": "poolrag.vllm_outputs",
    # what its calls take, under vLLM's names
    "PromptType": "poolrag.vllm_inputs",
    "TextPrompt": "poolrag.vllm_inputs",
    "TokensPrompt": "poolrag.vllm_inputs",
}

__all__ = [
    "LLM",
    "ClassificationOutput",
    "ClassificationRequestOutput",
    "DimensionsError",
    "EmbeddingOutput",
    "EmbeddingRequestOutput",
    "Engine",
    "EngineArgs",
    "EngineClosedError",
    "Entity",
    "InputTooLongError",
    "InputTypeError",
    "InvalidInputError",
    "ModelLoadError",
    "OutOfMemoryError",
    "PoolerConfig",
    "PoolingOutput",
    "PoolingParams",
    "PoolingRequestOutput",
    "PoolragError",
    "PromptType",
    "QuantizationRanges",
    "ScoringOutput",
    "ScoringRequestOutput",
    "TextPrompt",
    "TokensPrompt",
    "UnsupportedTaskError",
    "quantize_vectors",
]
__version__ = "0.1.0"


if not TYPE_CHECKING:  # a checker reads the imports above instead, so a misspelt name is an error there

    def __getattr__(name: str) -> Any:
        module = _EXPORTS.get(name)
        if module is None:
            raise AttributeError(f"module 'poolrag' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later look-ups skip this function
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
