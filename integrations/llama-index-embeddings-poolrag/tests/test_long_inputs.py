"""Issue 45, item 2: PoolragEmbedding embeds a 200-text batch holding 277-token paragraphs
(all-MiniLM-L6-v2 reads 256) with the vectors of ``Engine.embed_array``'s default and of
sentence-transformers, in process and through ``poolrag serve``; ``truncate_prompt_tokens=None``
refuses them instead, as it is documented to."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from llama_index.embeddings.poolrag import PoolragEmbedding

from poolrag import Engine, InputTooLongError, InvalidInputError
from poolrag.testing.long_texts import long_batch, sentence_transformers_vectors


@pytest.fixture(scope="module")
def batch(minilm_engine: Engine) -> list[str]:
    return long_batch(minilm_engine.tokenizer)


def test_a_long_batch_gets_the_engines_and_sentence_transformers_vectors(
    minilm_engine: Engine, minilm_url: str, minilm_path: Path, batch: list[str]
) -> None:
    expected = minilm_engine.embed_array(batch)
    reference = sentence_transformers_vectors(batch, minilm_path)
    np.testing.assert_allclose(expected, reference, rtol=0, atol=1e-6)
    for where in ({"engine": minilm_engine}, {"base_url": minilm_url}):
        got = np.asarray(PoolragEmbedding(**where).get_text_embedding_batch(batch), dtype=np.float32)
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)


def test_truncate_prompt_tokens_none_refuses(
    minilm_engine: Engine, minilm_url: str, batch: list[str]
) -> None:
    with pytest.raises(InputTooLongError):
        PoolragEmbedding(engine=minilm_engine, truncate_prompt_tokens=None).get_text_embedding_batch(
            batch[:4]
        )
    with pytest.raises(InvalidInputError, match="more than the model's maximum"):
        PoolragEmbedding(base_url=minilm_url, truncate_prompt_tokens=None).get_text_embedding_batch(batch[:4])
