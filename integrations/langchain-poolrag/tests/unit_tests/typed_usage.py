"""Code written for LangChain's HuggingFace classes with the class name swapped, as a typed
application writes it: type-checked by ``test_public_types.py`` under ``mypy --strict``, never run.

The arguments used here run as written (docs/integrations.md, ``test_embeddings.py`` and the
reranker's tests); what a checker must refuse carries ``# type: ignore[CODE]``, and under
``--strict`` an ignore that silences nothing is itself an error.
"""

from __future__ import annotations

from langchain_core.documents import BaseDocumentCompressor
from langchain_core.embeddings import Embeddings
from langchain_poolrag import PoolragEmbeddings, PoolragReranker


def huggingface_embeddings(model: str) -> Embeddings:
    """``HuggingFaceEmbeddings``' own arguments, constructor-only here."""
    embeddings = PoolragEmbeddings(
        model_name=model,
        model_kwargs={"device": "cpu"},
        encode_kwargs={"normalize_embeddings": True},
        cache_folder="/models",
        multi_process=False,
    )
    vector: list[float] = embeddings.embed_query("a")
    PoolragEmbeddings(model_name=model, cache_folder=3)  # type: ignore[arg-type]
    PoolragEmbeddings(model_nme=model)  # type: ignore[call-arg]
    print(embeddings.cache_folder, vector)  # type: ignore[attr-defined]
    return embeddings


def cross_encoder_reranker(model: str) -> BaseDocumentCompressor:
    """``HuggingFaceCrossEncoder``'s ``model_kwargs``, with ``CrossEncoderReranker``'s ``top_n``."""
    reranker = PoolragReranker(model_name=model, model_kwargs={"device": "cpu", "max_length": 256}, top_n=2)
    PoolragReranker(model_name=model, model_kwargs=["cpu"])  # type: ignore[arg-type]
    return reranker
