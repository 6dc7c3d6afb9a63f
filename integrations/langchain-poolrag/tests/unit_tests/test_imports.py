from langchain_poolrag import __all__

EXPECTED_ALL = ["PoolragColBERTRetriever", "PoolragEmbeddings", "PoolragReranker", "__version__"]


def test_all_imports() -> None:
    assert sorted(EXPECTED_ALL) == sorted(__all__)
