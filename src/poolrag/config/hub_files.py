"""Which of a hub repo's files a model loads, chosen from the repo's file list before downloading.

A repo holds more than its model: ONNX and OpenVINO exports (several variants, hundreds of MB) in
``onnx/`` and ``openvino/``, the same weights twice (``pytorch_model.bin`` next to
``model.safetensors``), training leftovers. Globs cannot say "the safetensors, else the ``.bin``" nor
"the module folders", and huggingface_hub's ``*`` crosses ``/`` (``*.bin`` is also
``openvino/openvino_model.bin``), so the files are named one by one: in the root folder and in each
module folder ``modules.json`` names (what sentence-transformers loads), the configs and tokenizer
files, the model card, and the weights as transformers and vLLM pick them, safetensors first, else
``.bin``.
"""

from __future__ import annotations

from collections.abc import Iterable

#: configs, tokenizers, chat templates, a model's own code, ColBERT's artifact.metadata
SMALL_SUFFIXES = (".json", ".txt", ".model", ".tiktoken", ".py", ".jinja", ".metadata")
#: the model card, whose front matter declares the model's languages (:mod:`poolrag.config.model_card`)
MODEL_CARD = "README.md"
#: BGE-M3's heads next to the backbone, plain state dicts poolrag reads itself (not training state
#: such as ``optimizer.pt``, which a root ``*.pt`` would take)
HEAD_FILES = ("sparse_linear.pt", "colbert_linear.pt")


def model_files(listing: Iterable[str], modules: object = None) -> list[str]:
    """The paths of ``listing`` (a repo's files) a model loads; ``modules`` is the parsed
    ``modules.json`` of a sentence-transformers repo (``None`` for any other)."""
    folders = {""} | module_folders(modules)
    by_folder: dict[str, list[str]] = {}
    for path in listing:
        folder = path.rpartition("/")[0]
        if folder in folders:
            by_folder.setdefault(folder, []).append(path)
    chosen: list[str] = []
    for paths in by_folder.values():
        weights = [p for p in paths if p.endswith(".safetensors")] or [p for p in paths if p.endswith(".bin")]
        chosen += [
            p for p in paths if p.endswith(SMALL_SUFFIXES) or p in weights or p in (*HEAD_FILES, MODEL_CARD)
        ]
    return sorted(chosen)


def module_folders(modules: object) -> set[str]:
    """The folders a ``modules.json`` names (``""`` is the root, a Transformer saved there)."""
    if not isinstance(modules, list):
        return set()
    return {str(m.get("path") or "").strip("/") for m in modules if isinstance(m, dict)}
