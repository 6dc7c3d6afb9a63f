"""Code written for LlamaIndex's ``SentenceTransformerRerank`` with the class name swapped, as a
typed application writes it: type-checked by ``test_public_types.py`` under ``mypy --strict``, never
run.

The arguments used here run as written (docs/integrations.md, ``test_postprocessor_poolrag_rerank.py``);
what a checker must refuse carries ``# type: ignore[CODE]``, and under ``--strict`` an ignore that
silences nothing is itself an error.
"""

from __future__ import annotations

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.postprocessor.poolrag_rerank import PoolragRerank


def sentence_transformer_rerank(model: str) -> BaseNodePostprocessor:
    """``SentenceTransformerRerank``'s own arguments; ``model`` is read back too."""
    rerank = PoolragRerank(
        model=model,
        device="cpu",
        cache_folder="/models",
        cross_encoder_kwargs={"max_length": 256},
        top_n=2,
        keep_retrieval_score=True,
    )
    label: str | None = rerank.model
    PoolragRerank(model=model, cross_encoder_kwargs=256)  # type: ignore[arg-type]
    PoolragRerank(model=model, top_k=2)  # type: ignore[call-arg]
    print(rerank.device, label)  # type: ignore[attr-defined]
    return rerank
