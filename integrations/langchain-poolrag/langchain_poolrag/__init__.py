"""poolrag for LangChain: embeddings, a reranking document compressor and a ColBERT retriever.

Each class runs on an in-process :class:`poolrag.Engine` or on a ``poolrag serve`` URL with the
same results.
"""

from importlib import metadata

from langchain_poolrag.document_compressors import PoolragReranker
from langchain_poolrag.embeddings import PoolragEmbeddings
from langchain_poolrag.retrievers import PoolragColBERTRetriever

try:
    __version__ = metadata.version(__package__)
except metadata.PackageNotFoundError:  # run from a source tree that is not installed
    __version__ = ""

__all__ = ["PoolragColBERTRetriever", "PoolragEmbeddings", "PoolragReranker", "__version__"]
