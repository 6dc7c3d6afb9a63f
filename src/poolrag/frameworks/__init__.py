"""What the LangChain and LlamaIndex partner packages share, written once.

``langchain-poolrag`` and the ``llama-index-*-poolrag`` distributions (under ``integrations/``) are
thin: each class is its framework's base class plus the pieces here, so the two frameworks accept the
same constructor arguments, refuse the same mistakes and return the same numbers.

* :mod:`~poolrag.frameworks.backend_resolution`: constructor arguments → one
  :class:`~poolrag.backend.PoolingBackend` (engine, model to load, server URL or client, cache);
* :mod:`~poolrag.frameworks.fields`: those arguments as pydantic fields (both frameworks' classes are
  pydantic models); the only module of poolrag that imports pydantic outside the server;
* :mod:`~poolrag.frameworks.adapter_calls`: the embed calls with their input checks;
* :mod:`~poolrag.frameworks.ranking`: best-first order of scored candidates, and the rerankers'
  fields with their one scoring call;
* :mod:`~poolrag.frameworks.colbert_search`: the core ColBERT retriever as both framework retrievers
  use it;
* :mod:`~poolrag.frameworks.sparse_encoding`: BM25 or sparse-model vectors for the stores' hybrid
  search, which each framework's sparse class only reshapes;
* :mod:`~poolrag.frameworks.hybrid_search`: the core hybrid retriever over a poolrag collection,
  fusing as the collection's saved record says unless a fusion is named.

Nothing here imports either framework.
"""
