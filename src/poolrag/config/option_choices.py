"""The values an engine option may take, where the layer that acts on a value and the layer that
checks it for the caller both need the list: written once here, below both.

The loaders (``loading``) and the tuner (``core``) act on these values; ``engine_args`` and the
CLI's flags check them before anything loads. Plain tuples with no torch, so ``--help`` stays fast.
"""

from __future__ import annotations

from typing import Literal, get_args

#: which implementation runs an encoder: poolrag's own where it is exact, transformers', or either
ModelImpl = Literal["auto", "native", "transformers"]
MODEL_IMPLS: tuple[ModelImpl, ...] = get_args(ModelImpl)
#: how much the first load times the candidate paths (``$POOLRAG_TUNE`` is the default)
TuneMode = Literal["auto", "full", "cached", "off"]
TUNE_MODES: tuple[TuneMode, ...] = get_args(TuneMode)
TUNE_ENV = "POOLRAG_TUNE"  # the default of ``Engine(tune=...)``; tests set it to "off"
#: weight quantization (torchao); an index's compression is the store's
Quantization = Literal["int8", "fp8"]
QUANTIZATION_SCHEMES: tuple[Quantization, ...] = get_args(Quantization)
#: the weights' dtype by name (``Engine`` also takes a ``torch.dtype``)
DTypeName = Literal["auto", "float32", "fp32", "float", "bfloat16", "bf16", "float16", "fp16", "half"]
#: vLLM's model conversions: pool the backbone, score from lm_head rows, a process reward model
Convert = Literal["embed", "classify", "reward"]
#: faster, inexact CPU inference, kept only when its cosine to fp32 clears the bar
CpuFastMode = Literal["auto", "bf16", "int8"]
#: the forward compiled by inductor in the background, or never
CompileMode = Literal["off", "background"]
