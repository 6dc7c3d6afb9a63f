"""Whether a model folder holds the weights poolrag runs, and one line where it holds another form.

Hub repos ship models in forms beside PyTorch weights: a PEFT adapter (``adapter_config.json``
and the low-rank deltas of the base model it names) and ONNX / OpenVINO exports
(sentence-transformers' ``onnx/`` and ``openvino/`` folders, fastembed's ``model_optimized.onnx``).
poolrag runs ``model.safetensors`` / ``pytorch_model.bin`` (sharded or not). Without this check an
adapter alone fails as a config without ``model_type``, an adapter beside its base weights is
ignored (the base model runs, as transformers runs it without peft), and an export alone reaches
transformers' "no file named model.safetensors": none of them says what the folder is or what to do.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from poolrag.errors import ModelLoadError

logger = logging.getLogger(__name__)

#: the weight files transformers loads from a folder (what poolrag runs)
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
#: where sentence-transformers (3+) and fastembed put their ONNX and OpenVINO exports
_EXPORTS = ("*.onnx", "onnx/*.onnx", "openvino/*.xml", "openvino_model*.xml")
ADAPTER_CONFIG = "adapter_config.json"
#: the adapter's own weights, as peft saves them
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")


def check_weight_format(folder: Path) -> None:
    """Raise :class:`ModelLoadError` where ``folder`` (a transformer's) is a PEFT adapter, or holds
    an ONNX / OpenVINO export and no PyTorch weights. An adapter's config left beside full weights
    without the adapter's own weights (a repo merged and uploaded again) has nothing to apply: the
    weights run, with a warning."""
    full = any((folder / name).is_file() for name in WEIGHT_FILES)
    if (folder / ADAPTER_CONFIG).is_file():
        if not full or any((folder / name).is_file() for name in ADAPTER_WEIGHTS):
            raise ModelLoadError(_adapter_refusal(folder))
        logger.warning(
            "%s has an %s but no adapter weights; running its full weights as they are",
            folder,
            ADAPTER_CONFIG,
        )
    if full:
        return
    exports = sorted(str(p.relative_to(folder)) for pattern in _EXPORTS for p in folder.glob(pattern))
    if exports:
        raise ModelLoadError(
            f"{folder} holds no PyTorch weights ({' or '.join(WEIGHT_FILES[::2])}), only an ONNX/OpenVINO "
            f"export ({', '.join(exports[:3])}{', ...' if len(exports) > 3 else ''}), which poolrag does "
            "not run: load the model's folder or hub repo with its safetensors"
        )


def _adapter_refusal(folder: Path) -> str:
    """What the adapter is (its type, its base model) and how to merge it into a model poolrag runs."""
    try:
        settings = json.loads((folder / ADAPTER_CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        settings = {}
    settings = settings if isinstance(settings, dict) else {}
    kind = settings.get("peft_type") or "PEFT"
    base = settings.get("base_model_name_or_path") or "BASE"
    beside = (
        " beside full weights, which would run without it (merged into them already? remove the "
        f"adapter's files, {ADAPTER_CONFIG} and {' / '.join(ADAPTER_WEIGHTS)})"
        if any((folder / name).is_file() for name in WEIGHT_FILES)
        else ""
    )
    return (
        f"{folder} holds a {kind} adapter ({ADAPTER_CONFIG}) of {base!r}{beside}; poolrag runs merged "
        f"weights: merge it with peft, PeftModel.from_pretrained(AutoModel.from_pretrained({base!r}), "
        f"{str(folder)!r}).merge_and_unload().save_pretrained(OUT) beside its tokenizer (a "
        "sentence-transformers folder: model.transformers_model.merge_and_unload(), then "
        "model.save_pretrained(OUT)), and load OUT"
    )
