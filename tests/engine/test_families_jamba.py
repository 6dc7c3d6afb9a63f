"""Jamba (attention + Mamba layers) on CPU, where the mixer's PyTorch path reads ``dt_proj.weight``.

The runner pre-packs linear weights for oneDNN on CPU; a layer whose weight the model reads
directly must stay readable. Reference: transformers' JambaForSequenceClassification.
"""

from __future__ import annotations

import numpy as np
import pytest
from decoders.tiny_decoders import PAD, SIDES, TEXTS, build_jamba_classifier, run_padded, softmax

from poolrag import Engine


@pytest.fixture(scope="module")
def jamba(tmp_path_factory):
    folder = tmp_path_factory.mktemp("jamba")
    model, tokenizer = build_jamba_classifier(folder)
    return model, tokenizer, folder


@pytest.mark.parametrize("side", SIDES)
def test_jamba_classifier_matches_transformers(jamba, side):
    model, tokenizer, folder = jamba
    engine = Engine(folder)
    seqs = [tokenizer(t)["input_ids"] for t in TEXTS]
    logits = run_padded(model, seqs, PAD, side, lambda out, batch, last: out.logits.float().numpy())
    got = np.stack([r.outputs.probs for r in engine.classify(TEXTS)])
    np.testing.assert_allclose(got, softmax(logits), rtol=1e-5, atol=1e-6)
