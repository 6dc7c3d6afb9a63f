"""Wire a model folder into a runnable pipeline: model, tokenizer, input processor, poolers.

Defaults are decided here, once: the folder's sentence-transformers files first, then the
caller's ``pooler_config`` on top.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from torch import nn
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from poolrag.batching.token_budget import TokenBudgetBatcher
from poolrag.config.model_kind import ModelKind, detect_model_kind, supported_tasks, task_aliases
from poolrag.config.model_spec import ModelSpec, SpladeSpec
from poolrag.config.pooler_config import SENTENCE_POOLING, PoolerConfig
from poolrag.config.positions import usable_positions
from poolrag.config.registry import default_pooling
from poolrag.config.st_activations import activation_class
from poolrag.core.executor import ModelExecutor
from poolrag.errors import InvalidInputError, ModelLoadError
from poolrag.loading.decoder_loader import DECODER_KINDS, DecoderParts, load_decoder
from poolrag.loading.model_loader import load_projection, load_transformer
from poolrag.loading.native_loader import ModelImpl, try_load_native
from poolrag.loading.placement import Placement, check_model_fits, input_device
from poolrag.loading.sparse_heads import load_lexical_heads, load_masked_lm
from poolrag.loading.token_classify_heads import token_classify_head
from poolrag.params import MULTI_VECTOR_TASK, PoolerDefaults
from poolrag.pooling.decoder_poolers import LastTokenScorePooler, StepRewardPooler, TokenScorePooler
from poolrag.pooling.heads import (
    ActivationName,
    ClassifierHead,
    MatryoshkaHead,
    TokenClassifierHead,
    TokenEmbeddingHead,
)
from poolrag.pooling.late_chunks import LateChunkPooler
from poolrag.pooling.lm_head_rows import LMHeadRowsHead, vocab_ids
from poolrag.pooling.methods import pooling_method
from poolrag.pooling.sparse_poolers import LexicalHeadsPooler, SpladePooler
from poolrag.pooling.step_reward import LMHeadStepProjection, ModuleStepProjection, StepRewardHead
from poolrag.pooling.task_poolers import (
    EmbeddingPooler,
    SequenceClassificationPooler,
    TaskPooler,
    TokenClassificationPooler,
    TokenEmbeddingPooler,
)
from poolrag.runner.model_runner import ModelRunner
from poolrag.tokenization.input_processor import InputProcessor, PromptSettings
from poolrag.tokenization.late_chunks import LATE_CHUNK_TASK

logger = logging.getLogger(__name__)

# a CrossEncoder's activation_fn (a torch.nn class path) -> the head's activation
_CROSS_ENCODER_ACTIVATIONS: dict[str, ActivationName] = {
    "Sigmoid": "sigmoid",
    "Identity": "identity",
    "Softmax": "softmax",
}


# kinds whose heads read the backbone's hidden states in the poolers (the runner returns those)
_HIDDEN_STATE_HEAD_KINDS = frozenset({ModelKind.SPLADE, ModelKind.BGE_M3})


def _check_chunking(kind: ModelKind, pooler: PoolerConfig) -> None:
    if pooler.max_embed_len is not None and not pooler.enable_chunked_processing:
        raise ModelLoadError("pooler_config max_embed_len needs enable_chunked_processing=true")
    if pooler.enable_chunked_processing and kind is not ModelKind.EMBEDDING:
        raise ModelLoadError(
            f"pooler_config enable_chunked_processing applies to embedding models, not {kind.value}"
        )


@dataclass(slots=True)
class Pipeline:
    """One loaded model, wired: texts go through ``processor``, batches through ``executor``
    (batcher -> runner -> the task's pooler, driven by its core)."""

    kind: ModelKind
    supported_tasks: tuple[str, ...]
    tokenizer: PreTrainedTokenizerBase
    processor: InputProcessor
    executor: ModelExecutor
    pooler_config: PoolerConfig
    max_model_len: int
    embedding_dim: int | None
    classify_activation: ActivationName
    fingerprint: str
    # how many columns returned_token_ids may index for reward (labels or vocabulary rows)
    reward_columns: int | None = None
    # a task served by another task's pooler (a reward model's token_classify is its reward)
    task_aliases: dict[str, str] = field(default_factory=dict)

    @property
    def pooler_defaults(self) -> PoolerDefaults:
        """What this model fills in where a request is silent (beyond its facts), for
        :meth:`PoolingParams.verify <poolrag.params.PoolingParams.verify>`."""
        cfg = self.pooler_config
        return PoolerDefaults(
            use_activation=cfg.use_activation,
            raw_rewards=self.kind.rewards_are_raw,
            step_tag_id=cfg.step_tag_id,
            returned_token_ids=cfg.returned_token_ids,
            reward_columns=self.reward_columns,
            task_aliases=self.task_aliases,
        )


def _max_model_len(spec: ModelSpec, tokenizer: PreTrainedTokenizerBase, requested: int | None) -> int:
    hard = usable_positions(spec.hf_config)
    soft = [x for x in (hard, spec.st_max_seq_length) if x]
    if tokenizer.model_max_length and tokenizer.model_max_length < 1_000_000:
        soft.append(int(tokenizer.model_max_length))
    derived = min(soft) if soft else 512
    if requested is None:
        return derived
    if hard is not None and requested > hard:
        raise InvalidInputError(f"max_model_len={requested} exceeds the model's {hard} positions")
    return requested


def _classify_activation(spec: ModelSpec, pooler: PoolerConfig) -> ActivationName:
    if pooler.activation is not None:
        return pooler.activation
    named = activation_class(spec.cross_encoder_activation or "", tuple(_CROSS_ENCODER_ACTIVATIONS))
    if named is not None:
        return _CROSS_ENCODER_ACTIVATIONS[named]
    problem = getattr(spec.hf_config, "problem_type", None)
    if spec.num_labels == 1 or problem == "multi_label_classification":
        return "sigmoid"
    if problem == "regression":
        return "identity"
    return "softmax"


_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
_SAMPLE_WINDOWS = 64  # evenly spaced reads per weight file
_SAMPLE_BYTES = 4096


def _sampled_content(path: Path, size: int) -> bytes:
    """The file's head (a safetensors header) and evenly spaced windows of its body: retrained
    weights of the same shapes differ there, and reading ~300 KB costs nothing next to loading."""
    with path.open("rb") as handle:
        parts = [handle.read(65536)]
        for i in range(_SAMPLE_WINDOWS):
            handle.seek(size * i // _SAMPLE_WINDOWS)
            parts.append(handle.read(_SAMPLE_BYTES))
        handle.seek(max(size - _SAMPLE_BYTES, 0))
        parts.append(handle.read(_SAMPLE_BYTES))
    return b"".join(parts)


def fingerprint(spec: ModelSpec) -> str:
    """Identity of the weights for caches and collections: the config, every JSON file, and each
    weight file's name, size and sampled content (names and sizes alone cannot tell two
    checkpoints of one architecture apart)."""
    digest = hashlib.sha256(spec.hf_config.to_json_string().encode())
    for path in sorted(Path(spec.path).rglob("*")):
        if not path.is_file() or path.suffix not in (*_WEIGHT_SUFFIXES, ".json"):
            continue
        size = path.stat().st_size
        digest.update(f"{path.relative_to(spec.path)}:{size}".encode())
        digest.update(path.read_bytes() if path.suffix == ".json" else _sampled_content(path, size))
    return digest.hexdigest()[:16]


def build_pipeline(
    spec: ModelSpec,
    pooler_override: PoolerConfig,
    *,
    dtype: torch.dtype,
    device: torch.device,
    max_model_len: int | None,
    max_batch_tokens: int,
    trust_remote_code: bool,
    max_batch_size: int | None = None,
    tokenizer_path: str | None = None,
    placement: Placement | None = None,
    model_impl: ModelImpl = "auto",
) -> Pipeline:
    placement = placement or Placement()
    kind, pooler = _resolve_pooler(spec, pooler_override)
    tokenizer = _load_tokenizer(tokenizer_path or spec.transformer_path, trust_remote_code)
    check_model_fits(spec.transformer_path, dtype, device, placement)
    model, decoder, mlm_head = _load_backbone(
        spec, kind, dtype, device, trust_remote_code, placement, model_impl
    )
    # convert='classify' on an encoder classifier: token_classify is its own head on every token
    token_states = kind is ModelKind.SEQUENCE_CLASSIFIER and spec.convert == "classify"
    runner = _runner(model, kind, pooler, tokenizer, device, token_states)
    lm_rows = _lm_head_rows(spec, kind, decoder, tokenizer)
    if kind is ModelKind.DECODER_CLASSIFIER and decoder is not None:
        _match_labels_to_head(spec, decoder.score)
    max_len = _max_model_len(spec, tokenizer, max_model_len)
    processor = InputProcessor(
        tokenizer,
        max_len,
        PromptSettings(spec.prompts, spec.default_prompt_name),
        colbert=spec.colbert,
        uses_token_type_ids=runner.accepts_token_types,
        chunked=bool(pooler.enable_chunked_processing),
        max_embed_len=pooler.max_embed_len,
    )
    activation = _classify_activation(spec, pooler)
    context = _HeadContext(
        spec=spec,
        pooler=pooler,
        projection=load_projection(spec.dense, dtype, device),
        processor=processor,
        decoder=decoder,
        lm_rows=lm_rows,
        activation=activation,
        tokenizer=tokenizer,
        mlm_head=mlm_head,
        dtype=dtype,
        device=device,
        token_head=token_classify_head(model) if token_states else None,
    )
    heads = _POOLER_BUILDERS[kind](context)
    sizes = {} if max_batch_size is None else {"max_batch_size": max_batch_size}  # else the batcher's default
    batcher = TokenBudgetBatcher(max_batch_tokens=max(max_batch_tokens, max_len), **sizes)
    executor = ModelExecutor(runner, heads.poolers, batcher)
    logger.info(
        "loaded %s (%s) on %s as %s, max_model_len=%d, %s implementation",
        spec.architecture,
        kind.value,
        device,
        dtype,
        max_len,
        "native" if getattr(model, "native", False) else "transformers",
    )
    return Pipeline(
        kind=kind,
        supported_tasks=supported_tasks(kind, spec),
        tokenizer=tokenizer,
        processor=processor,
        executor=executor,
        pooler_config=pooler,
        max_model_len=max_len,
        embedding_dim=heads.embedding_dim,
        classify_activation=activation,
        fingerprint=fingerprint(spec),
        reward_columns=_reward_columns(spec, kind, decoder),
        task_aliases=task_aliases(kind, spec),
    )


def _resolve_pooler(spec: ModelSpec, override: PoolerConfig) -> tuple[ModelKind, PoolerConfig]:
    """The model's kind and its pooling settings: the caller's over the folder's, then the kind's
    defaults where neither says."""
    pooler = override.merged_over(spec.pooler_defaults)
    kind = detect_model_kind(spec, pooler)
    if kind in (ModelKind.EMBEDDING, ModelKind.BGE_M3) and override.use_activation is not None:
        # vLLM 0.32 calls an embedding model's normalisation use_activation: one switch, kept as normalize
        pooler = replace(pooler, normalize=override.normalize_switch(), use_activation=None)
    if pooler.pooling_type is None:
        pooler = pooler.merged_over(PoolerConfig(pooling_type=default_pooling(kind, spec.is_decoder)))
    if kind in (ModelKind.EMBEDDING, ModelKind.BGE_M3) and pooler.pooling_type not in SENTENCE_POOLING:
        raise ModelLoadError(f"pooling_type {pooler.pooling_type} cannot produce one embedding per text")
    if pooler.normalize is None:
        # sentence-transformers folders normalise only with a Normalize module; bare folders do.
        pooler = pooler.merged_over(PoolerConfig(normalize=not spec.is_sentence_transformers))
    _check_chunking(kind, pooler)
    return kind, pooler


def _load_tokenizer(path: str | Path, trust_remote_code: bool) -> PreTrainedTokenizerBase:
    tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
    # poolrag checks lengths against max_model_len itself (InputTooLongError); the tokenizer's own
    # "sequence length is longer than the specified maximum" warning names another limit and misleads.
    warned = getattr(tokenizer, "deprecation_warnings", None)
    if isinstance(warned, dict):
        warned["sequence-length-is-longer-than-the-specified-maximum"] = True
    return tokenizer


def _load_backbone(
    spec: ModelSpec,
    kind: ModelKind,
    dtype: torch.dtype,
    device: torch.device,
    trust_remote_code: bool,
    placement: Placement,
    model_impl: ModelImpl,
) -> tuple[nn.Module, DecoderParts | None, nn.Module | None]:
    """The network the runner calls, plus a decoder's parts or SPLADE's MLM head for the poolers."""
    decoder: DecoderParts | None = None
    mlm_head: nn.Module | None = None
    if kind in DECODER_KINDS:
        decoder = load_decoder(spec, kind, dtype, device, trust_remote_code, placement)
        model = decoder.backbone
    elif kind is ModelKind.SPLADE:
        model, mlm_head = load_masked_lm(spec, dtype, device, trust_remote_code, placement)
    else:
        # sparse kinds run their backbone as an embedder does; their heads work in the poolers
        load_kind = ModelKind.EMBEDDING if kind in _HIDDEN_STATE_HEAD_KINDS else kind
        model = try_load_native(spec, kind, dtype, device, placement, model_impl) or load_transformer(
            spec, load_kind, dtype, device, trust_remote_code, placement
        )
    if spec.is_decoder and hasattr(model.config, "use_cache"):
        model.config.use_cache = False  # one forward per batch: a KV cache is pure waste
    return model, decoder, mlm_head


def _runner(
    model: nn.Module,
    kind: ModelKind,
    pooler: PoolerConfig,
    tokenizer: PreTrainedTokenizerBase,
    device: torch.device,
    token_states: bool,
) -> ModelRunner:
    pad_id = tokenizer.pad_token_id
    if pad_id is None:
        pad_id = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
    # decoder heads run in the poolers: the runner only returns the backbone's hidden states
    runner_kind = ModelKind.EMBEDDING if kind in DECODER_KINDS or kind in _HIDDEN_STATE_HEAD_KINDS else kind
    # CLS embedders read one row per sequence: the native encoder's last layer computes only that row
    # past attention (exact). Never for MEAN/LAST, which read other rows.
    first_rows = (
        frozenset({"embed", "score"})
        if kind is ModelKind.EMBEDDING and pooler.pooling_type == "CLS"
        else frozenset()
    )
    return ModelRunner(
        model,
        runner_kind,
        pad_id,
        input_device(model, device),
        first_row_tasks=first_rows,
        token_states=token_states,
    )


@dataclass(slots=True)
class _HeadContext:
    """What every kind's pooler builder may read."""

    spec: ModelSpec
    pooler: PoolerConfig
    projection: nn.Module | None  # the sentence-transformers Dense layers, if any
    processor: InputProcessor
    decoder: DecoderParts | None
    lm_rows: LMHeadRowsHead | None
    activation: ActivationName  # of classify / score
    tokenizer: PreTrainedTokenizerBase
    mlm_head: nn.Module | None  # SPLADE's masked-LM head
    dtype: torch.dtype
    device: torch.device
    token_head: nn.Module | None = None  # an encoder classifier's head per token (convert='classify')

    @property
    def vector_dim(self) -> int:
        """Size of the vectors after the projection (the backbone's hidden size without one)."""
        if self.spec.dense:
            return self.spec.dense[-1].out_features
        return int(getattr(self.spec.hf_config, "hidden_size", 0) or 0)


@dataclass(slots=True)
class _TaskHeads:
    poolers: dict[str, TaskPooler]
    embedding_dim: int | None = None


def _embedding_heads(ctx: _HeadContext) -> _TaskHeads:
    assert ctx.pooler.pooling_type is not None
    head = MatryoshkaHead(ctx.projection)
    embed = EmbeddingPooler(pooling_method(ctx.pooler.pooling_type), head)
    poolers: dict[str, TaskPooler] = {
        "embed": embed,
        "score": embed,
        "token_embed": TokenEmbeddingPooler(TokenEmbeddingHead(None)),
    }
    # a chunk's mean is a part of the text's mean; a CLS / LAST vector has no part per chunk
    if ctx.pooler.pooling_type == "MEAN":
        poolers[LATE_CHUNK_TASK] = LateChunkPooler(head)
    return _TaskHeads(poolers, ctx.vector_dim)


def _colbert_heads(ctx: _HeadContext) -> _TaskHeads:
    tokens = TokenEmbeddingPooler(TokenEmbeddingHead(ctx.projection, ctx.processor.colbert_skiplist))
    return _TaskHeads({"token_embed": tokens, "score": tokens}, ctx.vector_dim)


def _calibrated_classifier(ctx: _HeadContext) -> ClassifierHead:
    """The classify / score head, its logits first calibrated by the pooler's ``logit_mean`` /
    ``logit_sigma`` (vLLM's options), so a fused score means the same whatever the reranker's kind."""
    mean, sigma = ctx.pooler.logit_mean, ctx.pooler.logit_sigma
    return ClassifierHead(ctx.activation, 0.0 if mean is None else mean, 1.0 if sigma is None else sigma)


def _sequence_classifier_heads(ctx: _HeadContext) -> _TaskHeads:
    classify = SequenceClassificationPooler(_calibrated_classifier(ctx))
    reward = SequenceClassificationPooler(ClassifierHead("identity"))
    poolers: dict[str, TaskPooler] = {"classify": classify, "score": classify, "reward": reward}
    if ctx.token_head is not None:
        poolers["token_classify"] = TokenScorePooler(ctx.token_head, TokenClassifierHead(ctx.activation))
    return _TaskHeads(poolers)


def _token_classifier_heads(ctx: _HeadContext) -> _TaskHeads:
    tokens = TokenClassificationPooler(TokenClassifierHead(ctx.pooler.activation or "softmax"))
    return _TaskHeads({"token_classify": tokens, "reward": tokens})


def _decoder_classifier_heads(ctx: _HeadContext) -> _TaskHeads:
    assert ctx.decoder is not None and ctx.decoder.score is not None
    score = ctx.decoder.score
    classify = LastTokenScorePooler(score, _calibrated_classifier(ctx))
    reward: TaskPooler
    if ctx.pooler.pooling_type == "ALL":  # vLLM's default for *ForRewardModel: a value per token
        reward = TokenScorePooler(score, TokenClassifierHead("identity"))
    else:  # the checkpoint's own forward: the value at the last real token
        reward = LastTokenScorePooler(score, ClassifierHead("identity"))
    tokens = TokenScorePooler(score, TokenClassifierHead(ctx.activation))
    return _TaskHeads({"classify": classify, "score": classify, "reward": reward, "token_classify": tokens})


def _lm_head_classifier_heads(ctx: _HeadContext) -> _TaskHeads:
    assert ctx.lm_rows is not None
    classify = LastTokenScorePooler(ctx.lm_rows, _calibrated_classifier(ctx))
    return _TaskHeads({"classify": classify, "score": classify})


def _step_reward_heads(ctx: _HeadContext) -> _TaskHeads:
    assert ctx.decoder is not None
    return _TaskHeads({"reward": StepRewardPooler(StepRewardHead(_step_projection(ctx.decoder, ctx.pooler)))})


def _splade_heads(ctx: _HeadContext) -> _TaskHeads:
    assert ctx.mlm_head is not None
    splade = ctx.spec.splade or SpladeSpec()  # a bare ForMaskedLM with pooling_type SPLADE: max, relu
    return _TaskHeads(
        {
            "sparse_embed": SpladePooler(
                ctx.mlm_head,
                int(ctx.spec.hf_config.vocab_size),
                splade.pooling_strategy,
                splade.activation_function,
            )
        }
    )


def _bge_m3_heads(ctx: _HeadContext) -> _TaskHeads:
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
    return _TaskHeads(dict.fromkeys(tasks, pooler), ctx.vector_dim)


# One builder per kind (a kind missing here fails the import-time check below, not a request).
_POOLER_BUILDERS: dict[ModelKind, Callable[[_HeadContext], _TaskHeads]] = {
    ModelKind.EMBEDDING: _embedding_heads,
    ModelKind.COLBERT: _colbert_heads,
    ModelKind.SEQUENCE_CLASSIFIER: _sequence_classifier_heads,
    ModelKind.TOKEN_CLASSIFIER: _token_classifier_heads,
    ModelKind.DECODER_CLASSIFIER: _decoder_classifier_heads,
    ModelKind.LM_HEAD_CLASSIFIER: _lm_head_classifier_heads,
    ModelKind.STEP_REWARD: _step_reward_heads,
    ModelKind.SPLADE: _splade_heads,
    ModelKind.BGE_M3: _bge_m3_heads,
}
assert set(_POOLER_BUILDERS) == set(ModelKind), "every ModelKind needs a pooler builder"


def _lm_head_rows(
    spec: ModelSpec, kind: ModelKind, decoder: DecoderParts | None, tokenizer: PreTrainedTokenizerBase
) -> LMHeadRowsHead | None:
    """The converted classifier's head; the config's label count is set to what it produces."""
    if kind is not ModelKind.LM_HEAD_CLASSIFIER:
        return None
    assert decoder is not None and decoder.output_embeddings is not None
    tokens = spec.classifier_from_token
    if not tokens:
        raise ModelLoadError(
            "convert='classify' needs the tokens whose lm_head rows score the input, e.g. "
            'hf_overrides={"classifier_from_token": ["no", "yes"]} (negative first, positive last)'
        )
    ids = vocab_ids(tokenizer, tokens)
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


def _match_labels_to_head(spec: ModelSpec, score: nn.Module | None) -> None:
    """Remote reward heads (Qwen2-Math-RM) leave config.num_labels at its default of 2 while
    producing one value; the head's output size is the truth."""
    linears = [m for m in score.modules() if isinstance(m, nn.Linear)] if score is not None else []
    if linears and linears[-1].out_features != spec.num_labels:
        logger.info(
            "%s: head has %d outputs, config says %d",
            spec.architecture,
            linears[-1].out_features,
            spec.num_labels,
        )
        spec.hf_config.num_labels = linears[-1].out_features


def _reward_columns(spec: ModelSpec, kind: ModelKind, decoder: DecoderParts | None) -> int | None:
    if kind is ModelKind.TOKEN_CLASSIFIER:
        return spec.num_labels
    if kind is not ModelKind.STEP_REWARD or decoder is None:
        return None
    if decoder.output_embeddings is not None:
        return int(decoder.output_embeddings.shape[0])
    linears = [m for m in decoder.score.modules() if isinstance(m, nn.Linear)] if decoder.score else []
    return linears[-1].out_features if linears else None
