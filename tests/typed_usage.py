"""Code as a typed application writes it against poolrag's public API: type-checked by
``test_public_types.py`` under ``mypy --strict``, never run.

Each call here runs as written against a real model (the tests of each front door say so); what a
checker must accept is plain code, what it must refuse carries ``# type: ignore[CODE]``. Under
``--strict`` an ignore that silences nothing is itself an error, so a refusal that stops being one
fails the check as surely as an accepted call that starts being refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import assert_type

import numpy as np
import torch
from PIL import Image

import poolrag
from poolrag import (
    LLM,
    ClassificationRequestOutput,
    EmbeddingRequestOutput,
    Engine,
    EngineArgs,
    PoolingParams,
    QuantizationRanges,
    ScoringRequestOutput,
    TextPrompt,
    TokensPrompt,
    quantize_vectors,
)
from poolrag.backend import InProcessEngine, PoolingBackend, PoolingEngine
from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.client import PoolragClient
from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker
from poolrag.ingest.encoders import ChunkEncoder
from poolrag.retrieval import Retriever
from poolrag.server import ServerSettings, create_app
from poolrag.sparse.vector import SparseVector
from poolrag.stores import InMemoryStore, StoreTemplate, VectorStore
from poolrag.stores.milvus import MilvusStore
from poolrag.stores.qdrant import QdrantStore


def engine_inputs(engine: Engine, image: Image.Image) -> None:
    """Texts, token prompts and images (docs/images.md) wherever a text goes."""
    ids = engine.tokenize("a cat")
    assert_type(engine.embed_array([Path("cat.jpg"), "a photo of a cat", image, b"\x89PNG"]), np.ndarray)
    engine.embed_array([TokensPrompt(prompt_token_ids=ids)])
    engine.embed_array(np.array(["a cat", "tax law"], dtype=object))  # a Ray Data batch's column
    engine.embed(TokensPrompt(prompt_token_ids=ids))
    engine.encode([Path("cat.jpg")], pooling_task="token_embed")
    score = engine.score("a photo of a cat", [Path("cat.jpg"), Path("dog.jpg")])[0].outputs.score
    assert_type(score, float)
    engine.score_array(image, ["a cat", "a dog"])
    engine.encode(["a"], pooling_task="tokn_embed")  # type: ignore[arg-type]
    engine.embed_array(42)  # type: ignore[arg-type]


def engine_options(folder: Path) -> None:
    """``Engine`` and ``EngineArgs`` take the same options, spelled the same."""
    EngineArgs(folder, pooler_config={"pooling_type": "CLS", "normalize": False})
    EngineArgs("model", pooler_config='{"pooling_type": "CLS"}', model_impl="native")
    Engine(folder, pooler_config={"pooling_type": "MEAN"}, cpu_fast_mode="int8", compile="off")
    Engine(folder, cpu_fast_mode="int4")  # type: ignore[arg-type]
    PoolingParams(returned_token_ids=[648, 387])  # vLLM's spelling
    ranges = QuantizationRanges.from_vectors({4: np.ones((2, 4), dtype=np.float32)})
    quantize_vectors(np.zeros((2, 4), dtype=np.float32), "int8", ranges=ranges)
    quantize_vectors("not", "the", "right")  # type: ignore[arg-type]


def vllm_code(llm: LLM) -> None:
    """Code written for vLLM's ``LLM`` keeps its types (docs/vllm.md)."""
    outs: list[EmbeddingRequestOutput] = llm.embed([TextPrompt(prompt="a"), TextPrompt(prompt="b")])
    llm.embed(np.array(["a", "b"], dtype=object))  # a Ray Data batch's column, as vLLM iterates it
    labels: list[ClassificationRequestOutput] = llm.classify("a")
    scores: list[ScoringRequestOutput] = llm.score("q", ["a"])
    data: torch.Tensor = llm.encode(["a"], pooling_task="token_embed")[0].outputs.data
    data.cpu()
    assert_type(outs[0].outputs.embedding, list[float])
    assert_type(labels[0].outputs.probs, list[float])
    assert_type(scores[0].outputs.score, float)
    llm.embed(42)  # type: ignore[arg-type]
    LLM("model", runner="generete")  # type: ignore[arg-type]
    for task in llm.supported_tasks:  # a model's own tasks are tasks encode takes
        llm.encode(["a"], pooling_task=task)
    llm.encode(["a"], pooling_task="generate")  # type: ignore[arg-type]


def backends(engine: Engine, client: PoolragClient) -> None:
    """The engine and the client are the backends the server, the cache and retrieval take."""
    doors: list[PoolingEngine] = [engine, client]
    hosted: InProcessEngine = engine
    backend: PoolingBackend = CachedEmbedder(engine, EmbeddingCache())
    create_app(engine, ServerSettings(served_model_names=("bge-small",)))  # docs/server.md
    assert_type(client.embed_array([Path("cat.jpg"), "a cat"]), np.ndarray)
    sparse: list[SparseVector] = engine.sparse_embed("a cat")
    client.embed_array(42)  # type: ignore[arg-type]
    del doors, hosted, backend, sparse


def stores_and_ingest(
    engine: Engine,
    memory: InMemoryStore,
    qdrant: QdrantStore,
    milvus: MilvusStore,
    template: StoreTemplate,
    embedder: CachedEmbedder,
) -> None:
    """Every store is a ``VectorStore``; the encoders are what a pipeline takes (docs/ingest.md)."""
    stores: list[VectorStore] = [memory, qdrant, milvus, template]  # a store written on the template too
    encoder: ChunkEncoder = DenseEncoder(embedder, dimensions=64)
    chunker = TokenChunker.for_model(engine.tokenizer, engine.facts)
    IngestPipeline(memory, DenseEncoder(embedder, dimensions=64), chunker)
    Retriever(qdrant, embedder, reranker=engine).search("query", k=5)
    del stores, encoder


def misspelt_names() -> None:
    """The lazy facades still tell a checker which names exist."""
    from poolrag import Egnine  # type: ignore[attr-defined]

    poolrag.PoolingParms(dimensions=3)  # type: ignore[attr-defined]
    del Egnine
