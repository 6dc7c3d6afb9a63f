"""poolrag for LangChain: embeddings, a reranking document compressor, a ColBERT retriever, a hybrid
retriever over a poolrag collection and sparse embeddings for Qdrant's and Milvus' hybrid search.

Each class runs on an in-process :class:`poolrag.Engine` or on a ``poolrag serve`` URL with the
same results. The sparse classes load on first use, so that their vector store packages (the
``qdrant`` and ``milvus`` extras) stay optional: without its extra, a class names it when constructed.
"""

from importlib import metadata
from typing import TYPE_CHECKING

from langchain_poolrag.document_compressors import PoolragReranker
from langchain_poolrag.embeddings import PoolragEmbeddings
from langchain_poolrag.hybrid_retrievers import PoolragHybridRetriever
from langchain_poolrag.retrievers import PoolragColBERTRetriever
from poolrag.frameworks.optional_classes import optional_class

if TYPE_CHECKING:
    from langchain_poolrag.milvus_sparse_embeddings import PoolragMilvusSparseEmbedding
    from langchain_poolrag.sparse_embeddings import PoolragSparseEmbeddings

try:
    __version__ = metadata.version(__package__)
except metadata.PackageNotFoundError:  # run from a source tree that is not installed
    __version__ = ""

#: each optional class: its module, and the package of the extra that module imports
_OPTIONAL = {
    "PoolragSparseEmbeddings": ("langchain_poolrag.sparse_embeddings", "langchain_qdrant"),
    "PoolragMilvusSparseEmbedding": ("langchain_poolrag.milvus_sparse_embeddings", "langchain_milvus"),
}


if not TYPE_CHECKING:  # a checker reads the imports above instead, so a misspelt name is an error there

    def __getattr__(name: str) -> object:
        if name in _OPTIONAL:  # without its extra, a stand-in that names the extra when constructed
            module, extra_package = _OPTIONAL[name]
            return optional_class(module, name, extra_package)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "PoolragColBERTRetriever",
    "PoolragEmbeddings",
    "PoolragHybridRetriever",
    "PoolragMilvusSparseEmbedding",
    "PoolragReranker",
    "PoolragSparseEmbeddings",
    "__version__",
]
