import sys

import langchain_poolrag
import pytest
from langchain_poolrag import __all__

from poolrag.frameworks.optional_classes import optional_class

EXPECTED_ALL = [
    "PoolragColBERTRetriever",
    "PoolragEmbeddings",
    "PoolragHybridRetriever",
    "PoolragMilvusSparseEmbedding",
    "PoolragReranker",
    "PoolragSparseEmbeddings",
    "__version__",
]


def test_all_imports() -> None:
    assert sorted(EXPECTED_ALL) == sorted(__all__)
    for name in __all__:  # the optional ones load on first use: the real classes, their extras installed
        assert "Not installed" not in (getattr(langchain_poolrag, name).__doc__ or "")


def test_star_import_needs_no_extra_and_a_class_without_its_extra_names_it_when_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for missing in ("langchain_qdrant", "langchain_milvus"):  # None in sys.modules: import fails
        for loaded in [m for m in sys.modules if m.startswith(f"{missing}.")]:
            monkeypatch.delitem(sys.modules, loaded)
        monkeypatch.setitem(sys.modules, missing, None)
    for loaded in ("langchain_poolrag.sparse_embeddings", "langchain_poolrag.milvus_sparse_embeddings"):
        monkeypatch.delitem(sys.modules, loaded, raising=False)
    optional_class.cache_clear()  # classes resolved with the extras installed, by the test above
    namespace: dict[str, object] = {}
    try:
        exec("from langchain_poolrag import *", namespace)
    finally:
        optional_class.cache_clear()  # the stand-ins go: later tests get the real classes
    assert set(EXPECTED_ALL) <= set(namespace)
    with pytest.raises(ImportError, match=r"needs langchain-milvus: pip install .*\[milvus\]"):
        namespace["PoolragMilvusSparseEmbedding"](model_name="any")
    with pytest.raises(ImportError, match=r"needs langchain-qdrant: pip install .*\[qdrant\]"):
        namespace["PoolragSparseEmbeddings"]()
