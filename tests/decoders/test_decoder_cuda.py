"""LLM embedders on a CUDA GPU (grouped key/value heads, rotary positions, packed varlen rows)
agree with the exact CPU path within half precision. Run with ``POOLRAG_TEST_CUDA=1``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers
from tiny_decoders import TEXTS, build

from poolrag import Engine

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="needs a CUDA GPU and POOLRAG_TEST_CUDA=1 (tests/engine/test_cuda.py)",
)

# fp16's narrow range costs gemma2 (embeddings scaled by sqrt(hidden), soft-capped logits) the most:
# 0.998 measured on an H100, where llama and qwen3 stay above 0.999
MIN_COSINE = {torch.float16: 0.995, torch.bfloat16: 0.99}


def _min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(((a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))).min())


@pytest.mark.parametrize("family", ["llama", "qwen3", "gemma2"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_last_token_embeddings_match_the_cpu(tmp_path, family: str, dtype: torch.dtype) -> None:
    model, _tokenizer = build(tmp_path, family, transformers.AutoModel)
    assert model.config.num_key_value_heads < model.config.num_attention_heads  # grouped heads
    cpu = Engine(tmp_path, device="cpu").embed_array(TEXTS)
    gpu = Engine(tmp_path, device="cuda", dtype=dtype).embed_array(TEXTS)
    assert gpu.shape == cpu.shape
    assert _min_cosine(gpu, cpu) >= MIN_COSINE[dtype]


def test_a_sliding_window_holds_on_inputs_longer_than_it(tmp_path) -> None:
    """Packed varlen attention sees every earlier token; a Mistral whose window (16) is shorter
    than its inputs must give what the CPU's windowed mask gives (a batch runs padded there)."""
    build(tmp_path, "mistral", transformers.AutoModel, sliding_window=16)
    texts = [" ".join(TEXTS) * 3, TEXTS[0]]
    cpu = Engine(tmp_path, device="cpu").embed_array(texts)
    gpu = Engine(tmp_path, device="cuda", dtype=torch.float16).embed_array(texts)
    assert _min_cosine(gpu, cpu) >= MIN_COSINE[torch.float16]
