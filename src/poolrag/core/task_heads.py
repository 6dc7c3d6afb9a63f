"""Each model kind's poolers: per task, a pooling method joined to a head (vLLM's pooler shape).

A builder reads only what :class:`HeadContext` holds, so the recipes in :mod:`.recipes` can name
them; heads that need the loaded network (a decoder's ``score``, lm_head rows, an MLM head) find
it in the context.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from poolrag.config.model_spec import ModelSpec, SpladeSpec
from poolrag.config.pooler_config import PoolerConfig
from poolrag.config.st_activations import activation_class
from poolrag.errors import ModelLoadError
from poolrag.loading.decoder_loader import DecoderParts
from poolrag.loading.sparse_heads import load_lexical_heads
from poolrag.loading.token_classify_heads import token_classify_head
from poolrag.params import MULTI_VECTOR_TASK
from poolrag.pooling.decoder_poolers import PooledScorePooler, TokenScorePooler
from poolrag.pooling.heads import (
    ActivationName,
    ClassifierHead,
    MatryoshkaHead,
    TokenClassifierHead,
    TokenEmbeddingHead,
)
from poolrag.pooling.late_chunks import LateChunkPooler
from poolrag.pooling.lm_head_rows import LMHeadRowsHead, vocab_ids
from poolrag.pooling.methods import POOLING_METHODS, LastPool, PoolingMethod, pooling_method
from poolrag.pooling.sparse_poolers import LexicalHeadsPooler, SpladePooler
from poolrag.pooling.step_reward import LMHeadStepProjection, ModuleStepProjection
from poolrag.pooling.task_poolers import EmbeddingPooler, SequenceRowsPooler, TaskPooler, TokenRowsPooler
from poolrag.tokenization.input_processor import InputProcessor
from poolrag.tokenization.late_chunks import LATE_CHUNK_TASK

logger = logging.getLogger(__name__)

# a CrossEncoder's activation_fn (a torch.nn class path) -> the head's activation
_CROSS_ENCODER_ACTIVATIONS: dict[str, ActivationName] = {
    "Sigmoid": "sigmoid",
    "Identity": "identity",
    "Softmax": "softmax",
    "Tanh": "tanh",
}


def classify_activation(spec: ModelSpec, pooler: PoolerConfig, task: str = "classify") -> ActivationName:
    """The activation of ``classify`` (and ``token_classify``) or of ``score``, as vLLM picks them:
    the pooler config's, else the one a sentence-transformers CrossEncoder saved (what its
    ``predict`` applies), else by the labels. Only ``classify`` reads ``problem_type`` (a
    regression head's value is the answer; transformers' loss for it applies nothing), while
    ``score`` is a probability whenever the model names no function (vLLM's cross-encoder rule)."""
    named = _named_activation(spec, pooler)
    if named is not None:
        return named
    problem = getattr(spec.hf_config, "problem_type", None) if task != "score" else None
    fallback: ActivationName
    if problem == "regression":
        fallback = "identity"
    elif spec.num_labels < 2 or problem == "multi_label_classification":
        fallback = "sigmoid"
    else:
        fallback = "softmax"
    if spec.cross_encoder_activation:
        logger.warning(
            "%s names the cross-encoder activation %s, which poolrag does not apply: its scores are the "
            "%s of the logits (the order is the same for a rising function); use_activation=False gives "
            "the raw logits to apply it yourself",
            spec.path,
            spec.cross_encoder_activation,
            fallback,
        )
    return fallback


def pair_activation(spec: ModelSpec, pooler: PoolerConfig) -> ActivationName:
    """What ``CrossEncoder.predict`` applies to a pair's logits (``classify_pairs``): the pooler
    config's, else the one a CrossEncoder saved, else sentence-transformers' default, a sigmoid
    for one label and none for several (it reads no ``problem_type``). Where no CrossEncoder
    saved one, ``classify`` of several labels takes vLLM's softmax instead."""
    return _named_activation(spec, pooler) or ("sigmoid" if spec.num_labels < 2 else "identity")


def _named_activation(spec: ModelSpec, pooler: PoolerConfig) -> ActivationName | None:
    """The activation the pooler config names, else the one a sentence-transformers CrossEncoder saved."""
    if pooler.activation_function is not None:
        return pooler.activation_function
    named = activation_class(spec.cross_encoder_activation or "", tuple(_CROSS_ENCODER_ACTIVATIONS))
    return None if named is None else _CROSS_ENCODER_ACTIVATIONS[named]


@dataclass(slots=True)
class HeadContext:
    """What every kind's pooler builder may read."""

    spec: ModelSpec
    pooler: PoolerConfig
    model: nn.Module  # the network the runner calls
    projection: nn.Module | None  # the sentence-transformers Dense layers, if any
    processor: InputProcessor
    decoder: DecoderParts | None
    tokenizer: PreTrainedTokenizerBase
    mlm_head: nn.Module | None  # SPLADE's masked-LM head
    dtype: torch.dtype
    device: torch.device

    @property
    def vector_dim(self) -> int:
        """Size of the vectors after the projection (the backbone's hidden size without one)."""
        if self.spec.dense:
            return self.spec.dense[-1].out_features
        return int(getattr(self.spec.hf_config, "hidden_size", 0) or 0)

    def activation(self, task: str = "classify") -> ActivationName:
        """Of ``task`` (classify, token_classify or score); read when a head is built, after the
        label count is corrected."""
        return classify_activation(self.spec, self.pooler, task)

    @property
    def sentence_method(self) -> PoolingMethod:
        """The pooling method that makes one row per text (LAST where the config names another
        kind of pooling, e.g. a reward model's ALL)."""
        kind = self.pooler.pooling_type
        return pooling_method(kind) if kind in POOLING_METHODS else LastPool()


@dataclass(slots=True)
class TaskHeads:
    """A kind's poolers by task, and what they tell the engine about the model."""

    poolers: dict[str, TaskPooler]
    embedding_dim: int | None = None
    head_columns: int | None = None  # columns returned_token_ids may index (labels or vocabulary rows)
    # tasks whose pooler reads each sequence's first row only: the native encoder's last layer may
    # compute that row alone (exact)
    first_row_tasks: frozenset[str] = field(default_factory=frozenset)


def embedding_heads(ctx: HeadContext) -> TaskHeads:
    assert ctx.pooler.pooling_type is not None
    head = MatryoshkaHead(ctx.projection)
    embed = EmbeddingPooler(pooling_method(ctx.pooler.pooling_type), head)
    poolers: dict[str, TaskPooler] = {
        "embed": embed,
        "score": embed,
        "token_embed": TokenRowsPooler(TokenEmbeddingHead(None)),
    }
    # a chunk's mean is a part of the text's mean; a CLS / LAST vector has no part per chunk
    if ctx.pooler.pooling_type == "MEAN":
        poolers[LATE_CHUNK_TASK] = LateChunkPooler(head)
    # a CLS that follows a left-out prompt is not the first row
    first_row = ctx.pooler.pooling_type == "CLS" and ctx.spec.include_prompt
    first_rows = frozenset({"embed", "score"}) if first_row else frozenset()
    return TaskHeads(poolers, ctx.vector_dim, first_row_tasks=first_rows)


def colbert_heads(ctx: HeadContext) -> TaskHeads:
    tokens = TokenRowsPooler(TokenEmbeddingHead(ctx.projection, ctx.processor.colbert_skiplist))
    return TaskHeads({"token_embed": tokens, "score": tokens}, ctx.vector_dim)


def _calibrated_classifier(ctx: HeadContext, task: str) -> ClassifierHead:
    """The classify or score head, its logits first calibrated by the pooler's ``logit_mean`` /
    ``logit_sigma`` (vLLM's options), so a fused score means the same whatever the reranker's kind."""
    mean, sigma = ctx.pooler.logit_mean, ctx.pooler.logit_sigma
    activation = ctx.activation(task)
    return ClassifierHead(activation, 0.0 if mean is None else mean, 1.0 if sigma is None else sigma)


def _classify_and_score(
    ctx: HeadContext, pooler_of: Callable[[ClassifierHead], TaskPooler]
) -> dict[str, TaskPooler]:
    """``classify`` and ``score`` poolers over one head kind: one pooler for both unless their
    activations differ (a regression head's classify is its raw value, its score a probability)."""
    classify = pooler_of(_calibrated_classifier(ctx, "classify"))
    if ctx.activation("score") == ctx.activation("classify"):
        return {"classify": classify, "score": classify}
    return {"classify": classify, "score": pooler_of(_calibrated_classifier(ctx, "score"))}


def sequence_classifier_heads(ctx: HeadContext) -> TaskHeads:
    poolers = _classify_and_score(ctx, SequenceRowsPooler)
    poolers["reward"] = SequenceRowsPooler(ClassifierHead("identity"))
    if ctx.spec.convert == "classify":  # token_classify: the model's own head on every token
        per_token = token_classify_head(ctx.model)
        poolers["token_classify"] = TokenScorePooler(per_token, TokenClassifierHead(ctx.activation()))
        return TaskHeads(poolers, head_columns=ctx.spec.num_labels)
    return TaskHeads(poolers)


def token_classifier_heads(ctx: HeadContext) -> TaskHeads:
    tokens = TokenRowsPooler(TokenClassifierHead(ctx.activation()))
    return TaskHeads({"token_classify": tokens, "reward": tokens}, head_columns=ctx.spec.num_labels)


def score_head_classifier_heads(ctx: HeadContext) -> TaskHeads:
    assert ctx.decoder is not None and ctx.decoder.score is not None
    score = ctx.decoder.score
    _match_labels_to_head(ctx.spec, score)
    poolers = _classify_and_score(ctx, lambda head: PooledScorePooler(ctx.sentence_method, score, head))
    if ctx.pooler.pooling_type == "ALL":  # vLLM's default for *ForRewardModel: a value per token
        poolers["reward"] = TokenScorePooler(score, TokenClassifierHead("identity"))
    else:  # the checkpoint's own forward: the value of the pooled row
        poolers["reward"] = PooledScorePooler(ctx.sentence_method, score, ClassifierHead("identity"))
    poolers["token_classify"] = TokenScorePooler(score, TokenClassifierHead(ctx.activation()))
    return TaskHeads(poolers, head_columns=ctx.spec.num_labels)


def lm_head_classifier_heads(ctx: HeadContext) -> TaskHeads:
    rows = _lm_head_rows(ctx)
    return TaskHeads(_classify_and_score(ctx, lambda head: PooledScorePooler(LastPool(), rows, head)))


def step_reward_heads(ctx: HeadContext) -> TaskHeads:
    assert ctx.decoder is not None
    projection = _step_projection(ctx.decoder, ctx.pooler)
    reward = TokenRowsPooler(TokenClassifierHead("softmax", projection))
    return TaskHeads({"reward": reward}, head_columns=projection.columns)


def splade_heads(ctx: HeadContext) -> TaskHeads:
    assert ctx.mlm_head is not None
    splade = ctx.spec.splade or SpladeSpec()  # a bare ForMaskedLM with pooling_type SPLADE: max, relu
    return TaskHeads(
        {
            "sparse_embed": SpladePooler(
                ctx.mlm_head,
                int(ctx.spec.hf_config.vocab_size),
                splade.pooling_strategy,
                splade.activation_function,
                splade.max_active_dims,
                splade.dropped_ends,
            )
        }
    )


def bge_m3_heads(ctx: HeadContext) -> TaskHeads:
    assert ctx.spec.lexical_heads is not None and ctx.pooler.pooling_type is not None
    hidden = int(ctx.spec.hf_config.hidden_size)
    sparse, colbert = load_lexical_heads(ctx.spec.lexical_heads, hidden, ctx.dtype, ctx.device)
    tok = ctx.tokenizer
    # FlagEmbedding's "unused tokens": never a sparse weight, whatever the head says
    special = (tok.cls_token_id, tok.eos_token_id, tok.pad_token_id, tok.unk_token_id)
    pooler = LexicalHeadsPooler(
        pooling_method(ctx.pooler.pooling_type),
        MatryoshkaHead(ctx.projection),
        sparse,
        colbert,
        frozenset(int(t) for t in special if t is not None),
    )
    tasks = ("embed", "score", "sparse_embed", "token_embed", MULTI_VECTOR_TASK)
    return TaskHeads(dict.fromkeys(tasks, pooler), ctx.vector_dim)


def dual_encoder_heads(ctx: HeadContext) -> TaskHeads:
    embed = SequenceRowsPooler(MatryoshkaHead(None))
    dim = int(getattr(ctx.spec.hf_config, "projection_dim", 0) or 0) or None
    return TaskHeads({"embed": embed, "score": embed}, dim)


def page_retriever_heads(ctx: HeadContext) -> TaskHeads:
    """The model's ``embeddings`` are projected and normalised already: every attended position is
    one token vector, as for ColBERT, with no projection of ours."""
    tokens = TokenRowsPooler(TokenEmbeddingHead(None, None))
    dim = int(getattr(ctx.spec.hf_config, "embedding_dim", 0) or 0) or None
    return TaskHeads({"token_embed": tokens, "score": tokens}, dim)


def _lm_head_rows(ctx: HeadContext) -> LMHeadRowsHead:
    """The converted classifier's head; the config's label count is set to what it produces."""
    decoder, spec = ctx.decoder, ctx.spec
    assert decoder is not None and decoder.output_embeddings is not None
    tokens = spec.classifier_from_token
    if not tokens:
        raise ModelLoadError(
            "convert='classify' needs the tokens whose lm_head rows score the input, e.g. "
            'hf_overrides={"classifier_from_token": ["no", "yes"]} (negative first, positive last)'
        )
    ids = vocab_ids(ctx.tokenizer, tokens)
    head = LMHeadRowsHead.from_vocab(decoder.output_embeddings, ids, decoder.final_softcap)
    decoder.output_embeddings = None  # only the chosen rows stay referenced
    labels = [str(t) for t in tokens] if head.num_labels > 1 else [str(tokens[-1])]
    spec.hf_config.id2label = dict(enumerate(labels))
    spec.hf_config.label2id = {label: i for i, label in enumerate(labels)}
    return head


def _step_projection(
    decoder: DecoderParts, pooler: PoolerConfig
) -> LMHeadStepProjection | ModuleStepProjection:
    if decoder.output_embeddings is not None:
        if not pooler.returned_token_ids:
            raise ModelLoadError(
                "a language-model process reward model needs pooler_config returned_token_ids "
                "(the ids of its good/bad step tokens); the full vocabulary is never scored"
            )
        return LMHeadStepProjection(decoder.output_embeddings, decoder.final_softcap)
    assert decoder.score is not None
    return ModuleStepProjection(decoder.score)


def _match_labels_to_head(spec: ModelSpec, score: nn.Module) -> None:
    """Remote reward heads (Qwen2-Math-RM) leave config.num_labels at its default of 2 while
    producing one value; the head's output size is the truth."""
    linears = [m for m in score.modules() if isinstance(m, nn.Linear)]
    if linears and linears[-1].out_features != spec.num_labels:
        logger.info(
            "%s: head has %d outputs, config says %d",
            spec.architecture,
            linears[-1].out_features,
            spec.num_labels,
        )
        spec.hf_config.num_labels = linears[-1].out_features
