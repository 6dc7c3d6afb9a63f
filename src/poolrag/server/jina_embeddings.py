"""Jina's embeddings fields on ``POST /v1/embeddings``: its ``task`` as the model's prompt, its
``late_chunking: true`` as spans over the joined inputs.

Jina's API (``api.jina.ai/v1/embeddings``) answers in OpenAI's shape, so its clients (LangChain's
``JinaEmbeddings``, LlamaIndex's, plain HTTP) reach poolrag through the same route; only these
request fields need translating.
"""

from __future__ import annotations

from collections.abc import Sequence

from poolrag.errors import InvalidInputError
from poolrag.model_facts import ModelFacts

#: Jina's retrieval tasks as the role they give a text; ``text-matching`` (symmetric) gives none.
_ROLES = {"retrieval.query": "query", "retrieval.passage": "document", "text-matching": None}


def jina_task_prompt(task: str | None, facts: ModelFacts) -> tuple[str | None, str | None]:
    """``(input_type, prompt_name)`` for Jina's ``task``: a folder prompt of that name where the
    model has one (jina-embeddings-v3 names its task prompts so), else the role of a retrieval task;
    a task that is neither is refused, naming what this model takes."""
    if task is None:
        return None, None
    if task in facts.prompt_names:
        return None, task
    if task in _ROLES:
        return _ROLES[task], None
    known = ", ".join(sorted({*_ROLES, *facts.prompt_names}))
    raise InvalidInputError(f"task {task!r} is not one this model takes: {known}", param="task")


def joined_with_spans(texts: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
    """Jina's ``late_chunking: true``: the texts as one document, joined by single spaces, and each
    text's ``[start, end)`` span in it, so every vector is pooled with the others as context."""
    spans: list[tuple[int, int]] = []
    start = 0
    for text in texts:
        spans.append((start, start + len(text)))
        start += len(text) + 1
    return " ".join(texts), spans
