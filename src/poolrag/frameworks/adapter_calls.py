"""The backend calls behind both frameworks' embedding and reranking classes, with their checks.

Each call hands the whole list to the backend at once: the engine packs forward passes by token
budget, which beats any fixed batch size chosen by an adapter. Results come back as Python lists
because both frameworks type embeddings as ``list[float]`` (Python floats hold float32 exactly).
"""

from __future__ import annotations

from collections.abc import Sequence

from poolrag.backend import PoolingBackend
from poolrag.errors import InputTypeError
from poolrag.frameworks.ranking import Ranked, rank_second_stage
from poolrag.params import PoolingParams
from poolrag.retrieval.fusion import DEFAULT_RERANK_WEIGHT, SecondStage


def check_text(text: object, what: str = "the text") -> str:
    if not isinstance(text, str):
        raise InputTypeError(f"{what} must be a string, not {type(text).__name__}")
    return text


def check_texts(texts: object) -> list[str]:
    # A bare string would otherwise be embedded one character at a time.
    if isinstance(texts, str):
        raise InputTypeError("expected a list of strings, got one string (embed it as a query instead)")
    if not isinstance(texts, Sequence):
        raise InputTypeError(f"expected a list of strings, not {type(texts).__name__}")
    return list(texts)


def embed_texts(backend: PoolingBackend, texts: object, params: PoolingParams) -> list[list[float]]:
    """One vector per text, in order."""
    return backend.embed_array(check_texts(texts), params).tolist()


async def aembed_texts(backend: PoolingBackend, texts: object, params: PoolingParams) -> list[list[float]]:
    return (await backend.aembed_array(check_texts(texts), params)).tolist()


def embed_text(backend: PoolingBackend, text: object, params: PoolingParams) -> list[float]:
    return backend.embed_array([check_text(text)], params)[0].tolist()


async def aembed_text(backend: PoolingBackend, text: object, params: PoolingParams) -> list[float]:
    return (await backend.aembed_array([check_text(text)], params))[0].tolist()


def rerank(
    backend: PoolingBackend,
    query: object,
    texts: list[str],
    params: PoolingParams,
    top_n: int | None,
    first_stage_scores: Sequence[float] | None = None,
    second_stage: SecondStage | str = SecondStage.REPLACE,
    weight: float = DEFAULT_RERANK_WEIGHT,
) -> list[Ranked]:
    """The ``top_n`` texts most relevant to ``query`` (all when ``None``), best first, scored in one
    call and ordered by :func:`~poolrag.frameworks.ranking.rank_second_stage`."""
    check_text(query, "the query")
    if not texts:
        return []
    scores = backend.score_array(query, texts, params)
    return rank_second_stage(scores, top_n, first_stage_scores, second_stage, weight)


async def arerank(
    backend: PoolingBackend,
    query: object,
    texts: list[str],
    params: PoolingParams,
    top_n: int | None,
    first_stage_scores: Sequence[float] | None = None,
    second_stage: SecondStage | str = SecondStage.REPLACE,
    weight: float = DEFAULT_RERANK_WEIGHT,
) -> list[Ranked]:
    check_text(query, "the query")
    if not texts:
        return []
    scores = await backend.ascore_array(query, texts, params)
    return rank_second_stage(scores, top_n, first_stage_scores, second_stage, weight)
