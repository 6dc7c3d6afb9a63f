"""What each ``modules.json`` entry of a sentence-transformers folder is, whatever version wrote it.

Every sentence-transformers release spells the ``type`` of a module differently: 2.x-5.x write the
module's file path (``sentence_transformers.models.Pooling``,
``sentence_transformers.sparse_encoder.models.SpladePooling``), 6.x the module path plus the class
(``sentence_transformers.sentence_transformer.modules.pooling.Pooling``,
``sentence_transformers.base.modules.transformer.Transformer``). In all of them the last dotted part
is the class name, so a module is recognised by that class (what it *is*), within the packages
poolrag knows (sentence-transformers itself and PyLate); a folder's own module code is never
imported, so a custom module is refused rather than guessed at.
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path

from poolrag.errors import ModelLoadError

#: packages whose module classes poolrag reproduces; anything else is the folder's own code
KNOWN_PACKAGES = ("sentence_transformers", "pylate")


class StModule(Enum):
    """The part of the forward pass a module plays, as poolrag runs it."""

    TRANSFORMER = "transformer"  # the backbone (its folder holds config.json and the weights)
    POOLING = "pooling"  # token vectors -> one vector (CLS / mean / last token)
    DENSE = "dense"  # a linear projection plus activation after pooling (or per token, ColBERT)
    NORMALIZE = "normalize"  # L2 normalisation of the output
    SPLADE_POOLING = "splade_pooling"  # MLM logits -> one sparse vector
    IDENTITY = "identity"  # does nothing at inference (Dropout)


#: class name -> role. ``MLMTransformer`` is sentence-transformers 4/5's SparseEncoder backbone
#: (6.x writes ``Transformer`` with ``transformer_task="fill-mask"`` instead).
SUPPORTED: dict[str, StModule] = {
    "Transformer": StModule.TRANSFORMER,
    "MLMTransformer": StModule.TRANSFORMER,
    "CLIPModel": StModule.TRANSFORMER,  # 2.x-5.x's CLIP module (clip-ViT-B-32): a CLIPModel folder
    "Pooling": StModule.POOLING,
    "Dense": StModule.DENSE,
    "Normalize": StModule.NORMALIZE,
    "SpladePooling": StModule.SPLADE_POOLING,
    "Dropout": StModule.IDENTITY,
}

#: modules sentence-transformers writes that poolrag recognises but cannot run, and why
NOT_SUPPORTED: dict[str, str] = {
    "StaticEmbedding": "a static (Model2Vec-style) token-embedding model has no transformer to run",
    "SparseStaticEmbedding": "an inference-free sparse encoder (static token weights) is not supported",
    "Router": "a Router sends queries and documents through different modules; not supported",
    "Asym": "an Asym module sends queries and documents through different modules; not supported",
    "SparseAutoEncoder": "a CSR sparse auto-encoder head is not supported",
    "WeightedLayerPooling": "pooling over a weighted mix of layers is not supported",
    "LayerNorm": "a LayerNorm module after pooling is not supported",
    "WordEmbeddings": "a word-embedding (GloVe-style) model has no transformer to run",
    "WordWeights": "a word-weights module is not supported",
    "BoW": "a bag-of-words model has no transformer to run",
    "CNN": "a CNN encoder is not supported",
    "LSTM": "an LSTM encoder is not supported",
    "LogitScore": "a causal-LM CrossEncoder scored from lm_head logits: load the backbone with "
    "convert='classify' and classifier_from_token instead",
}
MULTI_VECTOR = "a sentence-transformers MultiVectorEncoder is not supported; save it in the PyLate layout"
NOT_SUPPORTED |= dict.fromkeys(
    ("MultiVectorMask", "TokenPooling", "BaseTokenPooling", "HierarchicalTokenPooling", "LambdaTokenPooling"),
    MULTI_VECTOR,
)


def st_module_role(type_name: str, where: object) -> StModule:
    """The role of one ``modules.json`` ``type``; a module poolrag cannot run is a one-line error."""
    package = type_name.split(".", 1)[0]
    class_name = type_name.rsplit(".", 1)[-1]
    if package not in KNOWN_PACKAGES:
        raise ModelLoadError(
            f"{where}: sentence-transformers module {type_name!r} is the folder's own code; poolrag "
            f"runs only the modules of {' and '.join(KNOWN_PACKAGES)} and never imports a folder's code"
        )
    if class_name in SUPPORTED:
        return SUPPORTED[class_name]
    if class_name in NOT_SUPPORTED:
        raise ModelLoadError(
            f"{where}: sentence-transformers module {type_name!r}: {NOT_SUPPORTED[class_name]}"
        )
    raise ModelLoadError(
        f"{where}: unknown sentence-transformers module {type_name!r}; poolrag runs "
        f"{', '.join(SUPPORTED)} modules"
    )


def transformer_folder(folder: Path) -> Path:
    """Where a model folder keeps its backbone and tokenizer: the Transformer module's folder when
    ``modules.json`` names one, else the folder itself. Only the entries' class names are read
    (nothing is imported, and the other modules need not be ones poolrag runs)."""
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return folder
    for module in modules if isinstance(modules, list) else []:
        if (
            isinstance(module, dict)
            and SUPPORTED.get(str(module.get("type", "")).rsplit(".", 1)[-1]) is StModule.TRANSFORMER
        ):
            return folder / str(module.get("path", ""))
    return folder
