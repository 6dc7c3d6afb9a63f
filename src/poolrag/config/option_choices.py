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
QUANTIZATION_SCHEMES = ("int8", "fp8")
