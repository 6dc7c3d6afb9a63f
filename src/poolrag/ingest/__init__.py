"""Ingestion: read documents, chunk by tokens, embed through the cache, upsert idempotently."""

from poolrag.ingest.checkpoint import Checkpoint
from poolrag.ingest.chunker import Chunk, TokenChunker, chunk_id
from poolrag.ingest.default_model import default_model
from poolrag.ingest.encoders import ColbertEncoder, DenseEncoder
from poolrag.ingest.pipeline import IngestPipeline, IngestReport
from poolrag.ingest.readers import Document, from_iterable, read_paths

__all__ = [
    "Checkpoint",
    "Chunk",
    "ColbertEncoder",
    "DenseEncoder",
    "Document",
    "IngestPipeline",
    "IngestReport",
    "TokenChunker",
    "chunk_id",
    "default_model",
    "from_iterable",
    "read_paths",
]
