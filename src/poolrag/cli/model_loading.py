"""Loading the models a command names, the main one and a learned sparse one, the same way in
``ingest``, ``search`` and ``eval``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from poolrag.engine_args import EngineArgs

if TYPE_CHECKING:
    from poolrag.engine import Engine


def load_engine(args: EngineArgs) -> Engine:
    from poolrag import Engine

    return Engine.from_engine_args(args)


def engine_args_from(args: argparse.Namespace) -> EngineArgs:
    """The main model's engine flags (``--model``, else the default model)."""
    from poolrag.ingest import default_model

    return EngineArgs.from_cli_args(args, model=args.model or default_model())


def load_sparse_model(engine_args: EngineArgs) -> Engine:
    """Load a learned sparse model once, refusing one that makes no sparse vectors."""
    from poolrag.errors import InvalidInputError

    engine = load_engine(engine_args)
    model = engine_args.model
    if "sparse_embed" not in engine.supported_tasks:
        raise InvalidInputError(f"--sparse-model {model}: the model makes no sparse vectors (not SPLADE)")
    return engine
