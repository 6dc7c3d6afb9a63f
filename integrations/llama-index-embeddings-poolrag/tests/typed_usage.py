"""Code written for LlamaIndex's ``HuggingFaceEmbedding`` with the class name swapped, as a typed
application writes it: type-checked by ``test_public_types.py`` under ``mypy --strict``, never run.

The arguments used here run as written (docs/integrations.md, ``test_embeddings_poolrag.py``); what
a checker must refuse carries ``# type: ignore[CODE]``, and under ``--strict`` an ignore that
silences nothing is itself an error.
"""

from __future__ import annotations

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.embeddings.multi_modal_base import MultiModalEmbedding
from llama_index.embeddings.poolrag import PoolragEmbedding
from llama_index.embeddings.poolrag.multi_modal import PoolragMultiModalEmbedding


def huggingface_embedding(model: str) -> BaseEmbedding:
    """``HuggingFaceEmbedding``'s own arguments, constructor-only here."""
    embed_model = PoolragEmbedding(
        model_name=model,
        device="cpu",
        trust_remote_code=False,
        revision="main",
        token=None,
        cache_folder="/models",
        truncate_dim=256,
        parallel_process=False,
        target_devices=["cpu"],
        max_length=128,
    )
    vector: list[float] = embed_model.get_query_embedding("a")
    PoolragEmbedding(model_name=model, device=0)  # type: ignore[arg-type]
    PoolragEmbedding(model_nme=model)  # type: ignore[call-arg]
    print(embed_model.device, vector)  # type: ignore[attr-defined]
    return embed_model


def clip(model: str) -> MultiModalEmbedding:
    return PoolragMultiModalEmbedding(model_name=model, device="cpu", cache_folder="/models")
