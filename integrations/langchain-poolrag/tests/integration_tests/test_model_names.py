"""PoolragEmbeddings takes a model by the short name tutorials use, as LangChain's
HuggingFaceEmbeddings (sentence-transformers) does: ``all-MiniLM-L6-v2`` is
``sentence-transformers/all-MiniLM-L6-v2``, offline the copy installed as a package."""

from __future__ import annotations

import numpy as np
from langchain_poolrag import PoolragEmbeddings

from poolrag import Engine
from poolrag.testing.rag_corpus import TEXTS


def test_a_sentence_transformers_short_name_loads_offline(minilm_engine: Engine) -> None:
    embeddings = PoolragEmbeddings(model_name="all-MiniLM-L6-v2")
    by_name = np.array(embeddings.embed_documents(TEXTS[:3]))
    by_engine = np.array(PoolragEmbeddings(engine=minilm_engine).embed_documents(TEXTS[:3]))
    np.testing.assert_allclose(by_name, by_engine, atol=1e-6)
