"""Jamba (attention + Mamba layers) on CPU, where the mixer's PyTorch path reads ``dt_proj.weight``.

The runner pre-packs linear weights for oneDNN on CPU; a layer whose weight the model reads
directly must stay readable. Reference: transformers' JambaForSequenceClassification.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers
from decoders.tiny_decoders import BOS, EOS, PAD, SIDES, TEXTS, build_tokenizer, run_padded, softmax

from poolrag import Engine


@pytest.fixture(scope="module")
def jamba(tmp_path_factory):
    folder = tmp_path_factory.mktemp("jamba")
    tokenizer = build_tokenizer(folder)
    torch.manual_seed(0)
    config = transformers.JambaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        attn_layer_period=2,
        attn_layer_offset=1,
        expert_layer_period=2,
        expert_layer_offset=1,
        num_experts=2,
        num_experts_per_tok=1,
        mamba_d_state=4,
        mamba_d_conv=4,
        mamba_expand=2,
        mamba_dt_rank=8,
        pad_token_id=PAD,
        bos_token_id=BOS,
        eos_token_id=EOS,
        num_labels=3,
        initializer_range=0.2,
    )
    model = transformers.JambaForSequenceClassification(config).eval()
    model.save_pretrained(folder)
    return model, transformers.AutoTokenizer.from_pretrained(folder), folder


@pytest.mark.parametrize("side", SIDES)
def test_jamba_classifier_matches_transformers(jamba, side):
    model, tokenizer, folder = jamba
    engine = Engine(folder)
    seqs = [tokenizer(t)["input_ids"] for t in TEXTS]
    logits = run_padded(model, seqs, PAD, side, lambda out, batch, last: out.logits.float().numpy())
    got = np.stack([r.outputs.probs for r in engine.classify(TEXTS)])
    np.testing.assert_allclose(got, softmax(logits), rtol=1e-5, atol=1e-6)
