"""Loading the models a command names, the main one and a learned sparse one, the same way in
``ingest``, ``search`` and ``eval``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from poolrag.engine_args import EngineArgs
from poolrag.errors import InvalidInputError

if TYPE_CHECKING:
    from poolrag.engine import Engine


def load_engine(args: EngineArgs) -> Engine:
    from poolrag import Engine

    return Engine.from_engine_args(args)


def engine_args_from(args: argparse.Namespace, matryoshka: bool = False) -> EngineArgs:
    """The main model's engine flags (``--model``, else the default model); ``matryoshka`` declares
    the model Matryoshka (``--assume-matryoshka``, or a collection ingested so), as the vectors it
    is run for were made."""
    from poolrag.ingest import default_model

    engine_args = EngineArgs.from_cli_args(args, model=args.model or default_model())
    if not matryoshka:
        return engine_args
    return engine_args.replace(hf_overrides={**(engine_args.hf_overrides or {}), "is_matryoshka": True})


def load_sparse_model(engine_args: EngineArgs) -> Engine:
    """Load a learned sparse model once, refusing one that makes no sparse vectors."""
    engine = load_engine(engine_args)
    model = engine_args.model
    if "sparse_embed" not in engine.supported_tasks:
        raise InvalidInputError(f"--sparse-model {model}: the model makes no sparse vectors (not SPLADE)")
    return engine
