"""poolrag: serve pooling models (embedders, rerankers, classifiers, ColBERT, reward models)."""

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
from poolrag.outputs import (
    ClassificationOutput,
    EmbeddingOutput,
    PoolingOutput,
    PoolingRequestOutput,
    ScoringOutput,
)
from poolrag.params import PoolingParams
from poolrag.postprocess.entities import Entity

__all__ = [
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
