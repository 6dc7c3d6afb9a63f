"""Wire a model folder into a runnable pipeline: model, tokenizer, input processor, poolers.

Defaults are decided here, once: the folder's sentence-transformers files first, then the
caller's ``pooler_config`` on top.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from torch import nn
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from poolrag.batching.token_budget import TokenBudgetBatcher
from poolrag.config.model_kind import (
    ModelKind,
    detect_model_kind,
    pooled_task_score,
    supported_tasks,
    task_aliases,
)
from poolrag.config.model_spec import ModelSpec
from poolrag.config.network_head import NetworkHead
from poolrag.config.pooler_config import PoolerConfig
from poolrag.config.positions import usable_positions
from poolrag.config.registry import default_pooling
from poolrag.core.executor import ModelExecutor
from poolrag.core.recipes import RECIPES, LoadContext, LoadedNetwork, Recipe
from poolrag.core.task_heads import HeadContext, classify_activation, pair_activation
from poolrag.errors import InvalidInputError, ModelLoadError
from poolrag.fork_holds import hold_over_fork
from poolrag.loading.model_loader import load_projection
from poolrag.loading.native_loader import ModelImpl
from poolrag.loading.placement import Placement, check_model_fits, input_device
from poolrag.model_facts import ScoreKind
from poolrag.params import PoolerDefaults
from poolrag.pooling.heads import ActivationName, TokenClassifierHead
from poolrag.pooling.methods import POOLING_METHODS
from poolrag.runner.model_runner import ModelRunner
from poolrag.tokenization.input_processor import InputProcessor, PromptSettings

logger = logging.getLogger(__name__)

#: Held while a model and its heads are built: one at a time in the process.
MODEL_CONSTRUCTION = threading.RLock()


# A fork waits for a build in flight. A thread building at the fork (a first load's background tune
# builds its other path) does not exist in the child: the lock stayed held there, and the child's
# own builds waited forever, under transformers' patches (no weight init, no tying) never undone.
hold_over_fork(lambda: [MODEL_CONSTRUCTION])


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
    # classify_pairs': CrossEncoder.predict's, which differs from classify's where no CrossEncoder saved one
    pair_activation: ActivationName
    score_kind: ScoreKind  # what score computes: the kind's, or the one the pooler config's task names
    # how many columns returned_token_ids may index for reward or token_classify (labels or vocabulary rows)
    head_columns: int | None = None
    # a task served by another task's pooler (a reward model's token_classify is its reward)
    task_aliases: dict[str, str] = field(default_factory=dict)
    # the caller's pooler_config normalise switch: token_embed's default (embed's is pooler_config's)
    token_normalize: bool | None = None
    # tasks answered by per-token classifier rows: where returned_token_ids (and for reward step_tag_id) apply
    token_rows: frozenset[str] = frozenset()

    @property
    def pooler_defaults(self) -> PoolerDefaults:
        """What this model fills in where a request is silent (beyond its facts), for
        :meth:`PoolingParams.verify <poolrag.params.PoolingParams.verify>`."""
        cfg = self.pooler_config
        return PoolerDefaults(
            use_activation=cfg.classifier_switch,
            normalize=self.token_normalize,
            raw_rewards=self.kind.rewards_are_raw,
            step_tag_id=cfg.step_tag_id,
            returned_token_ids=cfg.returned_token_ids,
            head_columns=self.head_columns,
            task_aliases=self.task_aliases,
            token_rows=self.token_rows,
        )


def _max_model_len(spec: ModelSpec, tokenizer: PreTrainedTokenizerBase, requested: int | None) -> int:
    """The folder's ``max_seq_length``, else the tokenizer's ``model_max_length``, within the
    position table: sentence-transformers truncates at a saved ``max_seq_length`` even where the
    tokenizer says less, and reads the tokenizer only when the folder names no length."""
    hard = usable_positions(spec.hf_config)
    soft = [x for x in (hard, spec.st_max_seq_length) if x]
    tokenizer_limit = tokenizer.model_max_length
    if spec.st_max_seq_length is None and tokenizer_limit and tokenizer_limit < 1_000_000:
        soft.append(int(tokenizer_limit))
    derived = min(soft) if soft else 512
    colbert = spec.colbert
    if colbert is not None and colbert.own_lengths:
        # PyLate sets the Transformer's max_seq_length to query_length - 1 or document_length - 1
        # on each call and saves the last one (179 for 180): the model reads its own lengths
        longest = max(colbert.query_length, colbert.document_length)
        derived = min(longest, hard) if hard else longest
    if requested is None:
        return derived
    if hard is not None and requested > hard:
        raise InvalidInputError(f"max_model_len={requested} exceeds the model's {hard} positions")
    return requested


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


#: a tokenizer's files that are not JSON: a WordPiece ``vocab.txt``, BPE ``merges.txt``, a
#: sentencepiece ``*.model``, a tiktoken ranks file (what ``_tokenizer_shaping`` hashes too)
TOKENIZER_SUFFIXES = (".txt", ".model", ".tiktoken")


def vocabulary_files(folder: str | Path) -> list[Path]:
    """The non-JSON files that decide ``folder``'s tokenizer: none where it has a
    ``tokenizer.json`` (transformers builds the fast tokenizer from that alone and reads no other
    vocabulary file), else each ``TOKENIZER_SUFFIXES`` file beside it, which it converts from."""
    folder = Path(folder)
    if (folder / "tokenizer.json").is_file():
        return []
    return sorted(p for p in folder.glob("*") if p.is_file() and p.suffix in TOKENIZER_SUFFIXES)


def fingerprints(spec: ModelSpec) -> tuple[str, tuple[str, ...]]:
    """Identity of the weights for caches and collections: the config, every JSON file, each
    weight file's name, size and sampled content (names and sizes alone cannot tell two
    checkpoints of one architecture apart), and, for a tokenizer without a ``tokenizer.json``, the
    vocabulary files it is built from (:func:`vocabulary_files`; a folder with one keeps the
    identity it had before they were hashed). Then the other digests older poolrags took of the
    same files (the weight files read once for all): before 2026-11-28 the config was hashed with
    ``--assume-matryoshka``'s size declarations set, so a collection ingested with the flag then
    records that digest."""
    configs = [spec.weights_config or spec.hf_config.to_json_string()]
    if spec.weights_config and spec.hf_config.to_json_string() != spec.weights_config:
        configs.append(spec.hf_config.to_json_string())
    digests = [hashlib.sha256(config.encode()) for config in configs]
    for path in sorted(Path(spec.path).rglob("*")):
        if not path.is_file() or path.suffix not in (*_WEIGHT_SUFFIXES, ".json"):
            continue
        size = path.stat().st_size
        content = path.read_bytes() if path.suffix == ".json" else _sampled_content(path, size)
        for digest in digests:
            digest.update(f"{path.relative_to(spec.path)}:{size}".encode())
            digest.update(content)
    for path in vocabulary_files(spec.transformer_path):
        for digest in digests:
            digest.update(b"\0tokenizer:" + path.name.encode() + b"\0" + path.read_bytes())
    today, *earlier = (digest.hexdigest()[:16] for digest in digests)
    return today, tuple(earlier)


def build_pipeline(
    spec: ModelSpec,
    pooler_override: PoolerConfig,
    *,
    dtype: torch.dtype,
    device: torch.device,
    max_model_len: int | None,
    max_batch_tokens: int,
    trust_remote_code: bool,
    model_fingerprint: str,
    max_batch_size: int | None,
    tokenizer_path: str | None,
    placement: Placement,
    model_impl: ModelImpl,
) -> Pipeline:
    """Follow the kind's recipe: load its network, wrap it in a runner, join its poolers.

    ``model_fingerprint`` is the first of :func:`fingerprints` of ``spec``, taken once per load by
    the caller (each reading samples every weight file, and a tuned load builds several candidates).
    """
    kind, pooler = _resolve_pooler(spec, pooler_override)
    recipe = RECIPES[kind]
    tokenizer = _load_tokenizer(tokenizer_path or spec.transformer_path, trust_remote_code)
    if spec.lowercase:
        lowercase_first(tokenizer, spec.path)
    check_model_fits(spec.transformer_path, dtype, device, placement)
    # transformers builds modules under process-wide patches (meta-device weights); a model built
    # in another thread meanwhile (a background tune loading its other path) got meta tensors
    with MODEL_CONSTRUCTION:
        context = LoadContext(spec, dtype, device, trust_remote_code, placement, model_impl)
        loaded, runner = _load_network(recipe, context, tokenizer)
        max_len = _max_model_len(spec, tokenizer, max_model_len)
        processor = _processor(spec, tokenizer, runner, pooler, recipe, max_len)
        heads = recipe.heads(
            HeadContext(
                spec=spec,
                pooler=pooler,
                model=loaded.model,
                projection=load_projection(spec.dense, dtype, device),
                processor=processor,
                decoder=loaded.decoder,
                tokenizer=tokenizer,
                mlm_head=loaded.mlm_head,
                dtype=dtype,
                device=device,
            )
        )
    runner.first_row_tasks = heads.first_row_tasks
    activation = classify_activation(spec, pooler)  # after the heads: they may correct the label count
    tasks = supported_tasks(kind, spec)
    score_kind = pooled_task_score(kind, tasks, pooler)
    token_rows = frozenset(
        task
        for task, pooled in heads.poolers.items()
        if isinstance(getattr(pooled, "head", None), TokenClassifierHead)
    )
    _check_step_settings(kind, pooler, token_rows)
    sizes = {} if max_batch_size is None else {"max_batch_size": max_batch_size}  # else the batcher's default
    batcher = TokenBudgetBatcher(max_batch_tokens=max(max_batch_tokens, max_len), **sizes)
    logger.info(
        "loaded %s (%s) on %s as %s, max_model_len=%d, %s implementation",
        spec.architecture,
        kind.value,
        device,
        dtype,
        max_len,
        "native" if getattr(loaded.model, "native", False) else "transformers",
    )
    return Pipeline(
        kind=kind,
        supported_tasks=tasks,
        tokenizer=tokenizer,
        processor=processor,
        executor=ModelExecutor(runner, heads.poolers, batcher),
        pooler_config=pooler,
        max_model_len=max_len,
        embedding_dim=heads.embedding_dim,
        classify_activation=activation,
        fingerprint=model_fingerprint,
        pair_activation=pair_activation(spec, pooler),
        head_columns=heads.head_columns,
        task_aliases=task_aliases(kind, spec),
        token_normalize=pooler_override.normalize_switch() if "token_embed" in tasks else None,
        score_kind=score_kind,
        token_rows=token_rows,
    )


def _load_network(
    recipe: Recipe, context: LoadContext, tokenizer: PreTrainedTokenizerBase
) -> tuple[LoadedNetwork, ModelRunner]:
    """The recipe's network with its weights loaded, and the runner that calls it on a batch."""
    loaded = recipe.load(context)
    model = loaded.model
    if context.spec.is_decoder and hasattr(model.config, "use_cache"):
        model.config.use_cache = False  # one forward per batch: a KV cache is pure waste
    # convert='classify' on an encoder classifier: token_classify is its own head on every token
    token_states = recipe.network is NetworkHead.SEQUENCE and context.spec.convert == "classify"
    runner = ModelRunner(
        model,
        recipe.network,
        _pad_id(tokenizer),
        input_device(model, context.device),
        token_states=token_states,
    )
    return loaded, runner


def _processor(
    spec: ModelSpec,
    tokenizer: PreTrainedTokenizerBase,
    runner: ModelRunner,
    pooler: PoolerConfig,
    recipe: Recipe,
    max_len: int,
) -> InputProcessor:
    """What turns the caller's texts (and images) into the model's inputs: prompts, ColBERT markers,
    token types where the network reads them, chunking where the pooler config asks for it."""
    return InputProcessor(
        tokenizer,
        max_len,
        PromptSettings(spec.prompts, spec.default_prompt_name),
        colbert=spec.colbert,
        uses_token_type_ids=runner.accepts_token_types,
        chunked=bool(pooler.enable_chunked_processing),
        max_embed_len=pooler.max_embed_len,
        images=recipe.images(spec, max_len) if recipe.images is not None else None,
        include_prompt=spec.include_prompt,
    )


def _check_step_settings(kind: ModelKind, pooler: PoolerConfig, token_rows: frozenset[str]) -> None:
    """The pooler config's ``step_tag_id`` / ``returned_token_ids`` refused where no pooler of the
    model reads them (vLLM reads them only with STEP pooling): a setting that changes nothing."""
    if pooler.step_tag_id is not None and "reward" not in token_rows:
        raise ModelLoadError(
            f"pooler_config step_tag_id selects the step tokens of a process reward model's reward; "
            f"this model ({kind.value}) does not pool step tokens"
        )
    if pooler.returned_token_ids is not None and not token_rows:
        raise ModelLoadError(
            f"pooler_config returned_token_ids picks columns of per-token rows; this model "
            f"({kind.value}) answers no task with per-token rows"
        )


def _resolve_pooler(spec: ModelSpec, override: PoolerConfig) -> tuple[ModelKind, PoolerConfig]:
    """The model's kind and its pooling settings: the caller's over the folder's, then the kind's
    defaults where neither says."""
    pooler = override.merged_over(spec.pooler_defaults)
    kind = detect_model_kind(spec, pooler)
    recipe = RECIPES[kind]
    if recipe.sentence_vectors and isinstance(override.activation, bool):
        raise InvalidInputError(
            "pooler_config activation true/false switches a classifier's activation (vLLM's older "
            "key for classification models); this model embeds: its switch is normalize",
            param="pooler_config",
        )
    if recipe.sentence_vectors and override.use_activation is not None:
        # vLLM 0.32 calls an embedding model's normalisation use_activation: one switch, kept as normalize
        pooler = replace(pooler, normalize=override.normalize_switch(), use_activation=None)
    if pooler.pooling_type is None:
        pooler = pooler.merged_over(PoolerConfig(pooling_type=default_pooling(kind, spec.is_decoder)))
    if recipe.sentence_vectors and pooler.pooling_type not in POOLING_METHODS:
        raise ModelLoadError(f"pooling_type {pooler.pooling_type} cannot produce one embedding per text")
    if pooler.normalize is None:
        # sentence-transformers folders normalise only with a Normalize module; bare folders do.
        pooler = pooler.merged_over(PoolerConfig(normalize=not spec.is_sentence_transformers))
    if pooler.max_embed_len is not None and not pooler.enable_chunked_processing:
        raise ModelLoadError("pooler_config max_embed_len needs enable_chunked_processing=true")
    if pooler.enable_chunked_processing and not recipe.chunked_processing:
        raise ModelLoadError(
            f"pooler_config enable_chunked_processing applies to embedding models, not {kind.value}"
        )
    return kind, pooler


def _load_tokenizer(path: str | Path, trust_remote_code: bool) -> PreTrainedTokenizerBase:
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
    except ValueError as exc:
        missing = _sentencepiece_missing(Path(path))
        if missing is None:
            raise
        raise ModelLoadError(missing) from exc
    # poolrag checks lengths against max_model_len itself (InputTooLongError); the tokenizer's own
    # "sequence length is longer than the specified maximum" warning names another limit and misleads.
    warned = getattr(tokenizer, "deprecation_warnings", None)
    if isinstance(warned, dict):
        warned["sequence-length-is-longer-than-the-specified-maximum"] = True
    return tokenizer


def _sentencepiece_missing(folder: Path) -> str | None:
    """Why a tokenizer saved as a sentencepiece model alone (``sentencepiece.bpe.model``, no
    ``tokenizer.json``: XLM-R's older derivatives) cannot be built here, or ``None``: converting it
    takes the sentencepiece package, and without it transformers tries the file as a tiktoken
    vocabulary ("Error parsing line ..."), which names neither."""
    models = sorted(p.name for p in folder.glob("*.model"))
    if not models or (folder / "tokenizer.json").is_file():
        return None
    try:
        import sentencepiece  # noqa: F401
    except ImportError:
        return (
            f"{folder}: its tokenizer is a sentencepiece model ({models[0]}) without a tokenizer.json, "
            "and building it needs the sentencepiece package: pip install sentencepiece (or save "
            "the tokenizer once where it is installed, which writes a tokenizer.json)"
        )
    return None


def lowercase_first(tokenizer: PreTrainedTokenizerBase, folder: Path) -> None:
    """Lowercase every text before the tokenizer's own normalisation, as sentence-transformers'
    ``do_lower_case`` does on a cased tokenizer: as a normaliser step of the fast tokenizer, so texts,
    pairs, prompts, length counts and character offsets all see it."""
    from tokenizers import normalizers

    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ModelLoadError(
            f"{folder}: sentence_bert_config.json sets do_lower_case, and its tokenizer "
            f"({type(tokenizer).__name__}) has no fast-tokenizer normaliser to lowercase with"
        )
    steps = [normalizers.Lowercase()] + ([backend.normalizer] if backend.normalizer is not None else [])
    backend.normalizer = normalizers.Sequence(steps)


def _pad_id(tokenizer: PreTrainedTokenizerBase) -> int:
    if tokenizer.pad_token_id is not None:
        return int(tokenizer.pad_token_id)
    return int(tokenizer.eos_token_id) if tokenizer.eos_token_id is not None else 0


def with_network(pipeline: Pipeline, model: nn.Module) -> Pipeline:
    """``pipeline`` around another copy of its network (a tuning candidate made from weights already
    in memory): the same tokenizer, processor and poolers, a runner and batcher of its own."""
    runner = pipeline.executor.runner
    batcher = pipeline.executor.batcher
    copy = ModelRunner(
        model,
        runner.head,
        runner.pad_token_id,
        runner.device,
        first_row_tasks=runner.first_row_tasks,
        token_states=runner.token_states,
    )
    sizes = TokenBudgetBatcher(batcher.max_batch_tokens, batcher.max_batch_size, batcher.max_padding)
    return replace(pipeline, executor=ModelExecutor(copy, pipeline.executor.poolers, sizes))
