"""Framework-free ColBERT retrieval: multi-vector indexes (in memory, Qdrant) and the searcher.

The Qdrant index is imported from :mod:`integrations.colbert.qdrant` so that ``qdrant-client``
stays optional.
"""

from integrations.colbert.index import Hit, MetadataFilter, MultiVectorIndex
from integrations.colbert.memory import InMemoryMultiVectorIndex
from integrations.colbert.searcher import ColBERTSearcher

__all__ = ["ColBERTSearcher", "Hit", "InMemoryMultiVectorIndex", "MetadataFilter", "MultiVectorIndex"]
