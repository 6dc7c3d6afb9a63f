"""Build the transformers module (and projection layers) an encoder recipe runs."""

from __future__ import annotations

import inspect
import json
import logging
import pickle
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from safetensors.torch import load_file
from torch import nn
from torch.nn import functional as F
from transformers import (
    AutoModel,
    AutoModelForSequenceClassification,
    AutoModelForTextEncoding,
    AutoModelForTokenClassification,
)

from poolrag.config.model_spec import DenseSpec, ModelSpec
from poolrag.config.network_head import NetworkHead
from poolrag.config.st_activations import DENSE_ACTIVATIONS, activation_class
from poolrag.errors import ModelLoadError
from poolrag.loading.load_noise import quiet_load
from poolrag.loading.placement import Placement
from poolrag.loading.quantization import saved_quantization

if TYPE_CHECKING:  # importing it loads transformers' whole modelling stack (seconds)
    from transformers import PreTrainedModel

logger = logging.getLogger(__name__)

_AUTO_CLASSES = {
    NetworkHead.NONE: AutoModel,
    NetworkHead.SEQUENCE: AutoModelForSequenceClassification,
    NetworkHead.TOKEN: AutoModelForTokenClassification,
}


def load_transformer(
    spec: ModelSpec,
    head: NetworkHead,
    dtype: torch.dtype,
    device: torch.device,
    trust_remote_code: bool,
    placement: Placement,
) -> PreTrainedModel:
    if spec.bidirectional:
        # NVIDIA's bidirectional Llama embedder on transformers' own layers (models/llama_bidirectional.py);
        # its reranker is split into backbone and ``score`` by ``decoder_loader``
        from poolrag.models.llama_bidirectional import make_bidirectional

        if head is not NetworkHead.NONE:
            raise ModelLoadError(f"{spec.architecture} runs its own head only after pooling")
        loaded = from_pretrained(AutoModel, spec, dtype, device, trust_remote_code, placement)
        return inference_ready(make_bidirectional(_backbone_of(loaded, spec)), device, placement)
    auto_class = _AUTO_CLASSES[head]
    if spec.encoder_only:
        if head is not NetworkHead.NONE:
            raise ModelLoadError(
                f"{spec.architecture}: an encoder-decoder's encoder runs as an embedder only"
            )
        auto_class = AutoModelForTextEncoding  # T5EncoderModel & co.: the decoder is never loaded
    extra: dict[str, object] = {}
    load_class: type = auto_class
    if auto_class is AutoModel:
        with quiet_load():  # the class lookup imports transformers' modelling stack (and torchao)
            load_class, extra = _backbone_loading(spec)
    # hidden-state kinds never run the pooler: a (.bin) checkpoint without it loads all the same
    unused = ("pooler.",) if head is NetworkHead.NONE else ()
    model = from_pretrained(
        load_class, spec, dtype, device, trust_remote_code, placement, unused=unused, **extra
    )
    if head is NetworkHead.NONE:
        model = _backbone_of(model, spec)
    return model.eval() if placement.places_itself else model.to(device).eval()


def _backbone_loading(spec: ModelSpec) -> tuple[type, dict[str, object]]:
    """The class and keywords that load a checkpoint's backbone without transformers reporting
    weights missing or unexpected, which reads like a broken model; the hidden-state kinds read
    ``last_hidden_state`` only.

    * ``add_pooling_layer=False`` for a checkpoint saved without the pooler of a backbone class that
      takes the flag (BERT, RoBERTa, XLM-R...; sentence-transformers' checkpoints often lack it). A
      checkpoint that has it keeps the layer (without it, its weights would be reported unexpected).
    * The backbone class, told to expect a ``lm_head`` it does not load, for a ``*ForCausalLM``
      checkpoint with an untied one (a Qwen3-Embedding-style folder)."""
    try:
        model_class = AutoModel._model_mapping[type(spec.hf_config)]  # type: ignore[attr-defined]
    except (KeyError, AttributeError):  # a class of the model's own code, or none registered
        return AutoModel, {}
    keys = _checkpoint_keys(Path(spec.transformer_path))
    if keys is None:
        return AutoModel, {}
    extra: dict[str, object] = {}
    if "add_pooling_layer" in inspect.signature(model_class.__init__).parameters and not any(
        key.split(".")[0] == "pooler" or ".pooler." in key for key in keys
    ):
        extra["add_pooling_layer"] = False
    if not any(key.startswith("lm_head.") for key in keys):
        return AutoModel, extra
    ignored = [*(model_class._keys_to_ignore_on_load_unexpected or ()), r"^lm_head\."]
    attrs = {"_keys_to_ignore_on_load_unexpected": ignored, "__module__": model_class.__module__}
    return type(model_class.__name__, (model_class,), attrs), extra


def _checkpoint_keys(folder: Path) -> list[str] | None:
    """The tensor names of a safetensors checkpoint, read from its header(s) alone; ``None`` for
    another format (PyTorch pickles are not opened just to look)."""
    single = folder / "model.safetensors"
    if single.is_file():
        from safetensors import safe_open

        with safe_open(str(single), framework="pt") as checkpoint:
            return list(checkpoint.keys())
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        return list(json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}))
    return None


def _backbone_of(model: PreTrainedModel, spec: ModelSpec) -> PreTrainedModel:
    """Hidden-state kinds read ``last_hidden_state``; a checkpoint whose remote code registers its
    head class as ``AutoModel`` (Qwen2-Math-RM, InternLM2 reward) returns the head's output, so
    its backbone runs instead."""
    backbone = getattr(model, "base_model", model)
    if backbone is not model:
        logger.info(
            "%s: running its backbone %s for hidden states", spec.architecture, type(backbone).__name__
        )
    return backbone


def load_dual_encoder(
    spec: ModelSpec,
    dtype: torch.dtype,
    device: torch.device,
    trust_remote_code: bool,
    placement: Placement,
) -> nn.Module:
    """A text-and-image model (CLIP, SigLIP) whole, behind one forward (models/dual_encoder.py)."""
    from poolrag.models.dual_encoder import DualEncoder

    model = DualEncoder(from_pretrained(AutoModel, spec, dtype, device, trust_remote_code, placement))
    return inference_ready(model, device, placement)


def inference_ready(model: nn.Module, device: torch.device, placement: Placement) -> nn.Module:
    """A whole wrapped model, frozen, in eval mode and on its device (unless it placed itself)."""
    model.requires_grad_(False)
    return model.eval() if placement.places_itself else model.to(device).eval()


#: the page retrievers transformers implements, by the architecture name their config.json gives
PAGE_RETRIEVER_CLASSES = ("ColPaliForRetrieval", "ColQwen2ForRetrieval", "ColModernVBertForRetrieval")


def load_page_retriever(
    spec: ModelSpec,
    dtype: torch.dtype,
    device: torch.device,
    trust_remote_code: bool,
    placement: Placement,
) -> nn.Module:
    """A page retriever (ColPali, ColQwen2, ColModernVBERT) whole, behind one forward
    (models/page_retriever.py). Its class is transformers' own of that name, from a fixed list: a
    config names which of them, never code."""
    import transformers

    from poolrag.models.page_retriever import PageRetriever

    if spec.architecture not in PAGE_RETRIEVER_CLASSES:
        raise ModelLoadError(f"{spec.architecture} is not one of {', '.join(PAGE_RETRIEVER_CLASSES)}")
    with quiet_load():  # the class's first import brings transformers' modelling stack (and torchao)
        model_class = getattr(transformers, spec.architecture)
    model = PageRetriever(from_pretrained(model_class, spec, dtype, device, trust_remote_code, placement))
    return inference_ready(model, device, placement)


def from_pretrained(
    auto_class: type,
    spec: ModelSpec,
    dtype: torch.dtype,
    device: torch.device,
    trust_remote_code: bool,
    placement: Placement,
    unused: tuple[str, ...] = (),
    **extra: object,
) -> object:
    """``auto_class.from_pretrained`` with poolrag's errors: what to pass when it cannot load or fit;
    without transformers' progress bar or torchao's build warnings (:mod:`.load_noise`).

    A checkpoint without weights the model runs is refused, as vLLM refuses it: transformers would
    start them at random with a warning, so every load would give other, meaningless outputs.
    Weights under the ``unused`` prefixes are never run, so they may be missing.

    A checkpoint saved quantized loads only through its format's library: without it, one line
    naming what to install (transformers' ImportError, from deep in its loading)."""
    saved = saved_quantization(spec.hf_config)
    if saved is not None and placement.quantization is not None:
        raise ModelLoadError(
            f"quantization={placement.quantization!r}: {spec.transformer_path} is saved "
            f"{saved}-quantized already; load it without quantization"
        )
    try:
        with quiet_load():
            model, info = auto_class.from_pretrained(  # type: ignore[attr-defined]
                spec.transformer_path,
                config=spec.hf_config,
                dtype=dtype,
                trust_remote_code=trust_remote_code,
                output_loading_info=True,
                **placement.from_pretrained_kwargs(device),
                **extra,
            )
    except pickle.UnpicklingError as exc:
        files = ", ".join(str(f) for f in sorted(Path(spec.transformer_path).glob("*.bin")))
        raise unsafe_pickle_error(files or str(spec.transformer_path), exc) from exc
    except (ValueError, ImportError) as exc:  # ImportError: the library a format or a model's code needs
        if saved is not None:
            hint = f" (its weights are saved {saved}-quantized; or load the unquantized checkpoint)"
        elif isinstance(exc, ValueError) and not trust_remote_code:
            hint = " (if the model ships its own code, pass trust_remote_code=True)"
        else:
            hint = ""
        raise ModelLoadError(
            f"cannot load {spec.architecture} from {spec.transformer_path}: {exc}{hint}"
        ) from exc
    except torch.OutOfMemoryError as exc:
        raise ModelLoadError(
            f"{spec.architecture} does not fit on {device}: pass device_map='auto' or quantization='int8'"
        ) from exc
    except RuntimeError as exc:  # transformers' refusal of weights whose shapes the config changed
        if "mismatched" not in str(exc):
            raise
        raise ModelLoadError(
            f"cannot load {spec.architecture} from {spec.transformer_path}: {exc} (the checkpoint's "
            "weights do not fit its config: does an hf_overrides key change a layer's size?)"
        ) from exc
    missing = sorted(key for key in info.get("missing_keys") or () if not key.startswith(unused))
    if missing:
        raise ModelLoadError(
            f"{spec.transformer_path} has no weights for {', '.join(missing[:4])}"
            f"{' ...' if len(missing) > 4 else ''}; as {auto_class.__name__} they would start at random"
            f"{_compiled_names(Path(spec.transformer_path))}"
        )
    return model


#: what torch.compile's wrapper puts before every name of the module it wraps
_COMPILED_PREFIX = "_orig_mod."


def _compiled_names(folder: Path) -> str:
    """Why the weights are missing where the checkpoint is the state dict of a ``torch.compile``d
    module: every tensor is there, under ``_orig_mod.``; else nothing."""
    keys = _checkpoint_keys(folder) or []
    if not keys or not all(key.startswith(_COMPILED_PREFIX) for key in keys):
        return ""
    return (
        f" (its tensors are named {_COMPILED_PREFIX}*, the state dict of a torch.compile'd module: "
        "save the model itself, model._orig_mod.save_pretrained(...))"
    )


def unsafe_pickle_error(where: str, exc: BaseException) -> ModelLoadError:
    """One line for a ``.bin`` that ``torch.load(weights_only=True)`` refused: it holds more than
    tensors (possibly code to run), so it is never loaded, and the user learns which file it is."""
    return ModelLoadError(
        f"refusing to load {where}: not a plain weights file (torch.load with weights_only=True "
        f"rejected it: {type(exc).__name__}); use safetensors weights or a file you trust"
    )


def _activation(path: str) -> nn.Module:
    name = activation_class(path)
    if name is None:
        raise ModelLoadError(
            f"projection activation {path!r} is not one poolrag builds: torch.nn's "
            f"{', '.join(DENSE_ACTIVATIONS)}"
        )
    return getattr(nn, name)()


class _L2Normalize(nn.Module):
    """A sentence-transformers ``Normalize`` module between pooling and a ``Dense`` layer."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, p=2, dim=-1)


def load_projection(layers: list[DenseSpec], dtype: torch.dtype, device: torch.device) -> nn.Module | None:
    """Stack the Dense / ColBERT linear layers into one module, or ``None`` when there are none."""
    if not layers:
        return None
    modules: list[nn.Module] = []
    for layer in layers:
        linear = nn.Linear(layer.in_features, layer.out_features, bias=layer.bias)
        if layer.weights_file is None or not layer.weights_file.is_file():
            raise ModelLoadError(f"projection weights missing in {layer.folder}")
        if layer.weights_file.suffix == ".safetensors":
            state = load_file(str(layer.weights_file))
        else:
            try:
                state = torch.load(layer.weights_file, map_location="cpu", weights_only=True)
            except pickle.UnpicklingError as exc:
                raise unsafe_pickle_error(str(layer.weights_file), exc) from exc
        prefix = layer.weight_key_prefix
        weights = {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
        try:
            linear.load_state_dict(weights)
        except RuntimeError as exc:
            raise ModelLoadError(f"projection weights in {layer.folder} do not fit: {exc}") from exc
        if layer.normalized_input:
            modules.append(_L2Normalize())
        modules.append(linear)
        act = _activation(layer.activation)
        if not isinstance(act, nn.Identity):
            modules.append(act)
    projection = nn.Sequential(*modules).to(device=device, dtype=dtype).eval()
    # inference only: frozen weights let heads run on inference-mode tensors from the forward pass
    return projection.requires_grad_(False)
