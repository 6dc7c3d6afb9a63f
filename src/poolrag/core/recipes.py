"""One recipe per model kind: how its network is loaded, what that network returns, and the
pooling method × head that answers each of its tasks.

What a kind *can do* (its tasks, score kind, default pooling; the docs' table) is declared in
``config.registry.KINDS``; how it is *built* from the parts in ``loading`` and ``pooling`` is
declared here, and ``model_setup`` follows the recipe without asking which kind it is. A kind whose
parts exist is one row in each table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
from torch import nn

from poolrag.config.model_kind import ModelKind
from poolrag.config.model_spec import ModelSpec
from poolrag.config.network_head import NetworkHead
from poolrag.core.task_heads import (
    HeadContext,
    TaskHeads,
    bge_m3_heads,
    colbert_heads,
    dual_encoder_heads,
    embedding_heads,
    lm_head_classifier_heads,
    page_retriever_heads,
    score_head_classifier_heads,
    sequence_classifier_heads,
    splade_heads,
    step_reward_heads,
    token_classifier_heads,
)
from poolrag.loading.decoder_loader import DecoderHead, DecoderParts, is_causal, load_decoder
from poolrag.loading.model_loader import load_dual_encoder, load_page_retriever, load_transformer
from poolrag.loading.native_loader import ModelImpl, try_load_native
from poolrag.loading.placement import Placement
from poolrag.loading.sparse_heads import load_masked_lm
from poolrag.tokenization.images import ImagePreprocessor
from poolrag.tokenization.page_inputs import PagePreprocessor


@dataclass(slots=True)
class LoadContext:
    """What a loader reads: the folder and where and how its weights go."""

    spec: ModelSpec
    dtype: torch.dtype
    device: torch.device
    trust_remote_code: bool
    placement: Placement
    model_impl: ModelImpl


@dataclass(slots=True)
class LoadedNetwork:
    """The module the runner calls, and the parts the poolers apply after it."""

    model: nn.Module
    decoder: DecoderParts | None = None  # a split checkpoint's own head or lm_head weight
    mlm_head: nn.Module | None = None  # SPLADE's masked-LM head


@dataclass(frozen=True, slots=True)
class Recipe:
    """``load`` builds the network, which returns ``network``'s rows; ``heads`` joins a pooling
    method and a head per task. ``sentence_vectors``: its ``embed`` is one vector per text (a
    sentence pooling, and vLLM's ``use_activation`` means normalise); ``chunked_processing``:
    inputs longer than the window may be embedded window by window; ``images``: images go wherever
    texts go, prepared by what it builds from the folder (given the model's length limit)."""

    load: Callable[[LoadContext], LoadedNetwork]
    heads: Callable[[HeadContext], TaskHeads]
    network: NetworkHead = NetworkHead.NONE
    sentence_vectors: bool = False
    chunked_processing: bool = False
    images: Callable[[ModelSpec, int], ImagePreprocessor] | None = None


def encoder_network(head: NetworkHead, ctx: LoadContext) -> LoadedNetwork:
    """poolrag's native encoder where it is exact, else transformers' module."""
    native = try_load_native(ctx.spec, head, ctx.dtype, ctx.device, ctx.placement, ctx.model_impl)
    model = native or load_transformer(
        ctx.spec, head, ctx.dtype, ctx.device, ctx.trust_remote_code, ctx.placement
    )
    return LoadedNetwork(model)


def split_network(head: Callable[[ModelSpec], DecoderHead], ctx: LoadContext) -> LoadedNetwork:
    """The backbone runs; the checkpoint's head is kept for the poolers."""
    parts = load_decoder(
        ctx.spec, head(ctx.spec), ctx.dtype, ctx.device, ctx.trust_remote_code, ctx.placement
    )
    return LoadedNetwork(parts.backbone, decoder=parts)


def masked_lm_network(ctx: LoadContext) -> LoadedNetwork:
    model, mlm_head = load_masked_lm(ctx.spec, ctx.dtype, ctx.device, ctx.trust_remote_code, ctx.placement)
    return LoadedNetwork(model, mlm_head=mlm_head)


def whole_network(load: Callable[..., nn.Module], ctx: LoadContext) -> LoadedNetwork:
    """A model wrapped whole behind one forward (a dual encoder, a page retriever)."""
    return LoadedNetwork(load(ctx.spec, ctx.dtype, ctx.device, ctx.trust_remote_code, ctx.placement))


def dual_encoder_images(spec: ModelSpec, max_len: int) -> ImagePreprocessor:
    """The folder's image processor; CLIP's vision tower reads a class token, SigLIP's pools by attention."""
    vision = getattr(spec.hf_config, "vision_config", None)
    class_token = not str(getattr(vision, "model_type", "")).startswith("siglip")
    patch_size = int(getattr(vision, "patch_size", 16))
    return ImagePreprocessor.from_folder(spec.transformer_path, patch_size, class_token)


def page_retriever_inputs(spec: ModelSpec, max_len: int) -> ImagePreprocessor:
    """The folder's processor, which writes pages and queries alike."""
    return PagePreprocessor.from_folder(spec.transformer_path, max_len=max_len)


def _step_head(spec: ModelSpec) -> DecoderHead:
    """A causal PRM scores with lm_head rows; a ``*ForProcessRewardModel`` with its token head."""
    return "lm_head" if is_causal(spec) else "token"


_BACKBONE = partial(encoder_network, NetworkHead.NONE)

RECIPES: dict[ModelKind, Recipe] = {
    ModelKind.EMBEDDING: Recipe(_BACKBONE, embedding_heads, sentence_vectors=True, chunked_processing=True),
    ModelKind.COLBERT: Recipe(_BACKBONE, colbert_heads),
    ModelKind.SEQUENCE_CLASSIFIER: Recipe(
        partial(encoder_network, NetworkHead.SEQUENCE), sequence_classifier_heads, NetworkHead.SEQUENCE
    ),
    ModelKind.TOKEN_CLASSIFIER: Recipe(
        partial(encoder_network, NetworkHead.TOKEN), token_classifier_heads, NetworkHead.TOKEN
    ),
    ModelKind.SCORE_HEAD_CLASSIFIER: Recipe(
        partial(split_network, lambda spec: "sequence"), score_head_classifier_heads
    ),
    ModelKind.LM_HEAD_CLASSIFIER: Recipe(
        partial(split_network, lambda spec: "lm_head"), lm_head_classifier_heads
    ),
    ModelKind.STEP_REWARD: Recipe(partial(split_network, _step_head), step_reward_heads),
    ModelKind.SPLADE: Recipe(masked_lm_network, splade_heads),
    # the sparse and ColBERT heads read the backbone's hidden states in the pooler: one pass, three vectors
    ModelKind.BGE_M3: Recipe(_BACKBONE, bge_m3_heads, sentence_vectors=True),
    ModelKind.DUAL_ENCODER: Recipe(
        partial(whole_network, load_dual_encoder),
        dual_encoder_heads,
        NetworkHead.PROJECTED,
        images=dual_encoder_images,
    ),
    # pages are images, queries texts, both prepared by the folder's own processor
    ModelKind.PAGE_RETRIEVER: Recipe(
        partial(whole_network, load_page_retriever), page_retriever_heads, images=page_retriever_inputs
    ),
}
assert set(RECIPES) == set(ModelKind), "every ModelKind needs a recipe"
