import langchain_poolrag
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
