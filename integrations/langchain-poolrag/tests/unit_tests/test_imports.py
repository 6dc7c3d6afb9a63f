import sys

import langchain_poolrag
import pytest
from langchain_poolrag import __all__

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
    for name in __all__:
        assert getattr(langchain_poolrag, name) is not None  # the optional ones load on first use


def test_star_import_needs_no_extra_and_a_class_without_its_extra_names_it_when_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for missing in ("langchain_qdrant", "langchain_milvus"):  # None in sys.modules: import fails
        for loaded in [m for m in sys.modules if m.startswith(f"{missing}.")]:
            monkeypatch.delitem(sys.modules, loaded)
        monkeypatch.setitem(sys.modules, missing, None)
    for loaded in ("langchain_poolrag.sparse_embeddings", "langchain_poolrag.milvus_sparse_embeddings"):
        monkeypatch.delitem(sys.modules, loaded, raising=False)
    namespace: dict[str, object] = {}
    exec("from langchain_poolrag import *", namespace)
    assert set(EXPECTED_ALL) <= set(namespace)
    with pytest.raises(ImportError, match=r"needs langchain-milvus: pip install .*\[milvus\]"):
        namespace["PoolragMilvusSparseEmbedding"](model_name="any")
    with pytest.raises(ImportError, match=r"needs langchain-qdrant: pip install .*\[qdrant\]"):
        namespace["PoolragSparseEmbeddings"]()
