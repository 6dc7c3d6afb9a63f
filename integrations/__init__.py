"""poolrag adapters for RAG frameworks.

* :mod:`integrations.langchain`: ``PoolragEmbeddings``, ``PoolragReranker``, ``PoolragColBERTRetriever``
* :mod:`integrations.llamaindex`: ``PoolragEmbedding``, ``PoolragRerank``, ``PoolragColBERTRetriever``

Each runs on an in-process :class:`poolrag.Engine` or on a ``poolrag serve`` URL with the same
results. Importing this package imports neither framework.
"""
