"""The activations TEI's routes apply to logits themselves, rather than the folder's.

Text Embeddings Inference reads no activation from a model folder: one logit goes through a
sigmoid unless ``raw_scores``. Its routes here ask the engine for the logits and apply it, so a
cross-encoder whose sentence-transformers config says Identity (ms-marco's) still answers TEI's
probabilities there, and its logits on the vLLM routes, as vLLM gives them. ``huggingface_hub``'s
``function_to_apply`` names the same functions.
"""

from __future__ import annotations

import numpy as np


def sigmoid(logits: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-logits))


def activated(logits: np.ndarray, function: str) -> np.ndarray:
    """``logits`` through ``function``: ``"sigmoid"``, ``"softmax"``, ``"tanh"`` (a CrossEncoder
    saved with it) or ``"none"``."""
    if function == "sigmoid":
        return sigmoid(logits)
    if function == "softmax":
        shifted = np.exp(logits - logits.max())
        return shifted / shifted.sum()
    if function == "tanh":
        return np.tanh(logits)
    return logits
