"""Read a model folder (transformers config + sentence-transformers / ColBERT files) into one spec.

Everything the engine needs to decide tasks and pooling defaults is read here, once, so no later
layer opens files of the folder again.
"""

from __future__ import annotations

import json
import logging
import string
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from transformers import PretrainedConfig

from poolrag.config.encoder_decoder import runs_encoder_only
from poolrag.config.families import (
    bidirectional_pooling,
    checkpoint_projection,
    is_bidirectional,
    named_colbert,
    read_hf_config,
)
from poolrag.config.pooler_config import (
    SENTENCE_POOLING,
    PoolerConfig,
    PoolingType,
)
from poolrag.config.registry import (
    CAUSAL_LM_AUTO_CLASS,
    MASKED_LM_AUTO_CLASS,
    ST_POOLING_MODES,
    VLLM_SPARSE_NAMES,
    ModelKind,
    Role,
    check_model_type,
    decoder_model_types,
    lookup_architecture,
    remote_classes,
)
from poolrag.config.st_modules import MULTI_VECTOR, StModule, st_module_role
from poolrag.config.weight_formats import check_weight_format
from poolrag.errors import ModelLoadError

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DenseSpec:
    """One projection layer after pooling (sentence-transformers ``Dense`` or a ColBERT ``linear``)."""

    folder: Path
    in_features: int
    out_features: int
    bias: bool
    activation: str  # a torch.nn class path, e.g. "torch.nn.modules.activation.Tanh"
    weight_key_prefix: str = "linear."  # sentence-transformers' Dense module, Stanford ColBERT's linear
    weights_file: Path | None = None
    normalized_input: bool = False  # a Normalize module comes before it: its input is L2-normalised


@dataclass(frozen=True, slots=True)
class ColbertSpec:
    """How queries and documents are encoded for late interaction (PyLate / Stanford ColBERT)."""

    query_prefix: str | None
    document_prefix: str | None
    query_length: int
    document_length: int
    attend_to_expansion_tokens: bool
    do_query_expansion: bool
    skiplist_words: tuple[str, ...]
    # PyLate and Stanford ColBERT tokenise to these lengths whatever the tokenizer's or
    # sentence_bert_config.json's max length says; a ColBERT without such settings (as vLLM
    # runs it) keeps the model's length
    own_lengths: bool = True


@dataclass(frozen=True, slots=True)
class SpladeSpec:
    """SPLADE pooling (sentence-transformers ``SpladePooling``): ``log(1 + relu(MLM logits))``
    (``log1p_relu`` applies ``log1p`` once more), then ``max`` or ``sum`` over the tokens."""

    pooling_strategy: str = "max"
    activation_function: str = "relu"
    max_active_dims: int | None = None  # the folder's default: keep this many largest weights
    # token ids left out at a sequence's start and end: vLLM's BertSpladeSparseEmbeddingModel
    # drops the config's cls_token_id and sep_token_id (sentence-transformers keeps every token)
    dropped_ends: tuple[int | None, int | None] = (None, None)


@dataclass(frozen=True, slots=True)
class LexicalHeadsSpec:
    """BGE-M3's extra heads next to the backbone: ``sparse_linear.pt`` (hidden → 1 weight per
    token) and ``colbert_linear.pt`` (hidden → ColBERT vector), plain state dicts."""

    sparse_linear: Path
    colbert_linear: Path


@dataclass(slots=True)
class ModelSpec:
    path: Path
    transformer_path: Path
    hf_config: PretrainedConfig
    architecture: str
    pooler_defaults: PoolerConfig
    dense: list[DenseSpec] = field(default_factory=list)
    prompts: dict[str, str] = field(default_factory=dict)
    default_prompt_name: str | None = None
    #: the Pooling module's ``include_prompt``: false pools the text's tokens only, the prompt's
    #: (with the special tokens before it) attended to but left out, as INSTRUCTOR was trained
    include_prompt: bool = True
    similarity: str | None = None
    st_max_seq_length: int | None = None
    lowercase: bool = False  # sentence_bert_config.json's do_lower_case: texts lowercased first
    st_truncate_dim: int | None = None  # config_sentence_transformers.json: the vectors' size by default
    colbert: ColbertSpec | None = None
    is_sentence_transformers: bool = False
    cross_encoder_activation: str | None = None
    convert: str | None = None  # "embed" | "classify" | "reward": adapt a *ForCausalLM checkpoint
    role: Role = Role.BACKBONE  # what the architecture name says (registry.lookup_architecture)
    bidirectional: bool = False  # a bidirectional Llama run on transformers' layers (config/families.py)
    splade: SpladeSpec | None = None  # a SparseEncoder folder (MLM logits -> sparse vector)
    lexical_heads: LexicalHeadsSpec | None = None  # BGE-M3: dense + sparse + ColBERT from one pass
    encoder_only: bool = False  # a T5-family encoder-decoder run as its encoder alone (encoder_decoder.py)
    weights_config: str = ""  # the config the fingerprint reads: hf_config without size declarations

    @property
    def is_decoder(self) -> bool:
        """A causal backbone (pooled LAST by default): as its config, its name or transformers' own
        tables say; a remote-code folder by the causal-LM class it registers, or by its reward head
        (``*ForRewardModel``: InternLM2's, Qwen2.5-Math-RM's, read at the last token)."""
        cfg = self.hf_config
        if self.bidirectional:
            return False
        if getattr(cfg, "is_decoder", False) or self.architecture.endswith("ForCausalLM"):
            return True
        if self.role is Role.REWARD_HEAD:
            return True
        if getattr(cfg, "is_encoder_decoder", False):
            return False  # its decoder is not what pools
        auto_map = getattr(cfg, "auto_map", None) or {}
        remote_causal = CAUSAL_LM_AUTO_CLASS in auto_map and MASKED_LM_AUTO_CLASS not in auto_map
        return cfg.model_type in decoder_model_types() or remote_causal

    @property
    def classifier_from_token(self) -> tuple[str | int, ...] | None:
        """Vocabulary entries whose lm_head rows become a converted classifier (vLLM's key)."""
        tokens = getattr(self.hf_config, "classifier_from_token", None)
        if tokens is None:
            return None
        if isinstance(tokens, (str, int)):
            tokens = [tokens]
        return tuple(tokens)

    @property
    def num_labels(self) -> int:
        return int(getattr(self.hf_config, "num_labels", 0) or 0)

    @property
    def id2label(self) -> dict[int, str]:
        raw = getattr(self.hf_config, "id2label", None) or {}
        return {int(k): str(v) for k, v in raw.items()}

    @property
    def matryoshka_dimensions(self) -> tuple[int, ...] | None:
        dims = getattr(self.hf_config, "matryoshka_dimensions", None)
        return tuple(int(d) for d in dims) if dims else None

    @property
    def is_matryoshka(self) -> bool:
        """Whether a prefix of a vector is a smaller vector: declared in config.json, or by a
        sentence-transformers folder saved with a ``truncate_dim`` (its author cut its vectors)."""
        declared = (
            bool(getattr(self.hf_config, "is_matryoshka", False)) or self.matryoshka_dimensions is not None
        )
        return declared or self.st_truncate_dim is not None


def _read_json(path: Path) -> dict[str, Any] | list[Any] | None:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ModelLoadError(f"{path} is not valid JSON: {exc}") from exc


def _dense_from_folder(folder: Path) -> DenseSpec:
    cfg = _read_json(folder / "config.json")
    if not isinstance(cfg, dict):
        raise ModelLoadError(f"Dense module at {folder} has no config.json")
    weights = folder / "model.safetensors"
    if not weights.is_file():
        weights = folder / "pytorch_model.bin"
    return DenseSpec(
        folder=folder,
        in_features=int(cfg["in_features"]),
        out_features=int(cfg["out_features"]),
        bias=bool(cfg.get("bias", True)),
        activation=str(cfg.get("activation_function", "torch.nn.modules.linear.Identity")),
        weights_file=weights,
    )


def _pooling_from_st(cfg: dict[str, Any], folder: Path) -> PoolingType:
    """The Pooling module's mode, as sentence-transformers 6 reads its config: ``pooling_mode`` when
    given (the 2.x-5.x ``pooling_mode_*`` flags are then ignored), else the one flag set, else mean
    (its default, also for a config that sets no flag)."""
    if "pooling_mode" not in cfg:  # sentence-transformers 2.x-5.x: one boolean flag per mode
        chosen = [mode for key, mode in ST_POOLING_MODES.items() if cfg.get(key)]
        if len(chosen) > 1:
            raise ModelLoadError(f"{folder}: concatenated pooling modes {chosen} are not supported")
        return chosen[0] if chosen else "MEAN"
    mode = cfg["pooling_mode"]  # sentence-transformers >= 6: one name, or a list to concatenate
    if isinstance(mode, list) and len(mode) == 1:
        mode = mode[0]
    if not isinstance(mode, str):
        raise ModelLoadError(f"{folder}: concatenated pooling modes {mode!r} are not supported")
    mode = mode.lower()
    table = {name: pooling for pooling, (name, _) in SENTENCE_POOLING.items()}
    if mode not in table:
        raise ModelLoadError(f"{folder}: sentence-transformers pooling mode {mode!r} is not supported")
    return table[mode]  # type: ignore[return-value]


def _include_prompt(cfg: dict[str, Any], folder: Path) -> bool:
    """The Pooling module's ``include_prompt``: false leaves the instruction prompt's tokens out of
    the pool (INSTRUCTOR); they are still attended to."""
    include = cfg.get("include_prompt", True)
    if not isinstance(include, bool):
        raise ModelLoadError(f"{folder}: Pooling include_prompt must be true or false, got {include!r}")
    return include


#: the one ``features`` key poolrag's Dense and Normalize act on: the pooled vector
_SENTENCE_EMBEDDING = "sentence_embedding"


def _check_sentence_level(folder: Path, kind: str, st_config: dict[str, Any]) -> None:
    """poolrag runs a Dense or Normalize module on the pooled vector, after pooling, with no
    residual (sentence-transformers >= 5's defaults). A module that reads or writes another key
    (``token_embeddings``: before pooling) or adds its input back (``use_residual``) would give
    other vectors: refused (a MultiVectorEncoder's per-token modules, by that name)."""
    cfg = _read_json(folder / "config.json") or {}
    assert isinstance(cfg, dict)
    keys = {k: cfg[k] for k in ("module_input_name", "module_output_name") if k in cfg}
    other = {k: v for k, v in keys.items() if v not in (None, _SENTENCE_EMBEDDING)}
    name = kind.rsplit(".", 1)[-1]
    if other and st_config.get("model_type") == "MultiVectorEncoder":
        raise ModelLoadError(f"{folder.parent}: {MULTI_VECTOR}")
    if other:
        found = ", ".join(f"{k}={v!r}" for k, v in other.items())
        raise ModelLoadError(
            f"{folder}: a {name} module on another vector than the pooled one ({found}) is not supported"
        )
    if cfg.get("use_residual"):
        raise ModelLoadError(f"{folder}: a Dense module with use_residual=true is not supported")


#: ``hf_overrides`` that say which sizes of the full vector may be cut (``--assume-matryoshka``): they
#: leave the model and its full vectors as they are, so the weights' fingerprint (which keys the
#: embedding cache) does not read them; the collection records them with its dimension.
_SIZE_DECLARATIONS = frozenset({"is_matryoshka", "matryoshka_dimensions"})


@dataclass(slots=True)
class _StFolder:
    """What a folder's sentence-transformers files say: its modules, in order, and its settings."""

    config: dict[str, Any]  # config_sentence_transformers.json
    transformer_path: Path
    is_listed: bool = False  # modules.json lists the modules
    pooling: PoolingType | None = None
    include_prompt: bool = True
    normalize: bool | None = None
    dense: list[DenseSpec] = field(default_factory=list)
    is_pylate: bool = False
    splade: SpladeSpec | None = None


def _read_st_folder(path: Path) -> _StFolder:
    modules = _read_json(path / "modules.json")
    st_config = _read_json(path / "config_sentence_transformers.json") or {}
    assert isinstance(st_config, dict)
    st = _StFolder(st_config, path, is_listed=isinstance(modules, list))
    if modules is not None and not isinstance(modules, list):
        raise ModelLoadError(f"{path / 'modules.json'}: expected a list of modules")
    for module in sorted(modules or [], key=lambda m: int(m.get("idx", 0))):
        kind = str(module.get("type", ""))
        folder = path / str(module.get("path", ""))
        module_role = st_module_role(kind, path / "modules.json")
        if module_role is StModule.TRANSFORMER:
            st.transformer_path = folder
        elif module_role is StModule.POOLING:
            pooling_config = _read_json(folder / "config.json")
            if not isinstance(pooling_config, dict):
                raise ModelLoadError(f"Pooling module at {folder} has no config.json")
            st.pooling = _pooling_from_st(pooling_config, folder)
            st.include_prompt = _include_prompt(pooling_config, folder)
        elif module_role is StModule.DENSE:
            if not kind.startswith("pylate"):  # PyLate's Dense projects token vectors by design
                _check_sentence_level(folder, kind, st_config)
            # after a Normalize, the Dense reads a unit vector, and its output is not one
            st.dense.append(replace(_dense_from_folder(folder), normalized_input=bool(st.normalize)))
            st.normalize = None
            st.is_pylate = st.is_pylate or kind.startswith("pylate")
        elif module_role is StModule.NORMALIZE:
            _check_sentence_level(folder, kind, st_config)
            st.normalize = True
        elif module_role is StModule.SPLADE_POOLING:
            st.splade = _splade_from_st(_read_json(folder / "config.json") or {}, folder)  # type: ignore[arg-type]
    st.is_pylate = st.is_pylate or st_config.get("model_type") == "ColBERT" or "query_length" in st_config
    return st


def load_model_spec(
    path: Path, hf_overrides: dict[str, Any] | None, trust_remote_code: bool, convert: str | None = None
) -> ModelSpec:
    """Read config.json and, when present, the sentence-transformers / ColBERT files of ``path``."""
    if convert not in (None, "embed", "classify", "reward"):
        raise ModelLoadError(f"convert must be 'embed', 'classify' or 'reward', not {convert!r}")
    st = _read_st_folder(path)
    transformer_path, st_config = st.transformer_path, st.config
    check_weight_format(transformer_path)  # an adapter or an export alone: what it is, before its config
    hf_config, weights_config = _overridden_config(transformer_path, hf_overrides, trust_remote_code)
    architecture, role = _checked_architecture(hf_config, trust_remote_code)
    encoder_only = runs_encoder_only(architecture, hf_config, role)
    colbert, dense = _colbert_layout(path, st, hf_config, architecture, role)
    bidirectional = is_bidirectional(architecture, hf_config, trust_remote_code)
    pooling = bidirectional_pooling(hf_config) if bidirectional and st.pooling is None else st.pooling
    truncate_dim = _positive_count(st_config, "truncate_dim", path)
    prompts = {str(k): str(v) for k, v in (st_config.get("prompts") or {}).items()}
    st_max = _read_json(transformer_path / "sentence_bert_config.json") or {}
    max_seq = st_max.get("max_seq_length") if isinstance(st_max, dict) else None
    return ModelSpec(
        path=path,
        transformer_path=transformer_path,
        hf_config=hf_config,
        weights_config=weights_config,
        architecture=architecture,
        pooler_defaults=PoolerConfig(pooling_type=pooling, normalize=st.normalize, dimensions=truncate_dim),
        dense=dense,
        prompts=prompts,
        default_prompt_name=_default_prompt_name(st_config, prompts, path),
        include_prompt=st.include_prompt,
        similarity=st_config.get("similarity_fn_name"),
        st_max_seq_length=int(max_seq) if max_seq else None,
        lowercase=isinstance(st_max, dict) and st_max.get("do_lower_case") is True,
        st_truncate_dim=truncate_dim,
        colbert=colbert,
        is_sentence_transformers=st.is_listed,
        cross_encoder_activation=_cross_encoder_activation(st_config, hf_config),
        convert=convert,
        role=role,
        bidirectional=bidirectional,
        splade=_splade(st.splade, st_config, hf_config, architecture, path),
        lexical_heads=_lexical_heads(transformer_path),
        encoder_only=encoder_only,
    )


def _overridden_config(
    folder: Path, hf_overrides: dict[str, Any] | None, trust_remote_code: bool
) -> tuple[PretrainedConfig, str]:
    """The config with ``hf_overrides`` set, and the JSON the weights' fingerprint reads: taken
    before the size declarations, which change no vector."""
    hf_config = read_hf_config(folder, trust_remote_code)
    declared = {k: v for k, v in (hf_overrides or {}).items() if k in _SIZE_DECLARATIONS}
    for key, value in (hf_overrides or {}).items():
        if key not in declared:
            setattr(hf_config, key, value)
    weights_config = hf_config.to_json_string()
    for key, value in declared.items():
        setattr(hf_config, key, value)
    return hf_config, weights_config


def _checked_architecture(hf_config: PretrainedConfig, trust_remote_code: bool) -> tuple[str, Role]:
    """The architecture and its role, checked before any weights are read: a name poolrag cannot
    run is refused here, with what it can run."""
    architectures = list(getattr(hf_config, "architectures", None) or [])
    architecture = architectures[0] if architectures else type(hf_config).__name__.replace("Config", "Model")
    provided = remote_classes(getattr(hf_config, "auto_map", None))
    role = lookup_architecture(architecture, provided, trust_remote_code)
    if not (trust_remote_code and architecture in provided):  # a folder's own class may reuse a name
        check_model_type(architecture, str(getattr(hf_config, "model_type", "") or ""))
    return architecture, role


def _colbert_layout(
    path: Path, st: _StFolder, hf_config: PretrainedConfig, architecture: str, role: Role
) -> tuple[ColbertSpec | None, list[DenseSpec]]:
    """A ColBERT's settings and projections: Stanford's own folder, a family's named layout, or
    PyLate's sentence-transformers modules; other folders keep their ``Dense`` modules."""
    if role is Role.COLBERT and architecture == "HF_ColBERT":
        return _stanford_colbert(path)
    pylate = _pylate_colbert(st.config) if st.is_pylate else None
    if role is Role.COLBERT:
        return named_colbert(st.transformer_path, hf_config, st.dense, pylate)
    return pylate, st.dense


def _cross_encoder_activation(st_config: dict[str, Any], hf_config: PretrainedConfig) -> str | None:
    """sentence-transformers >= 6 writes it in its own config file, 4.x-5.x in a
    "sentence_transformers" section of config.json, < 4 (most hub cross-encoders) as config.json's
    "sbert_ce_default_activation_function"; all three still load so."""
    activation = st_config.get("activation_fn")
    st_section = getattr(hf_config, "sentence_transformers", None)
    if activation is None and isinstance(st_section, dict):
        activation = st_section.get("activation_fn")
    if activation is None:
        activation = getattr(hf_config, "sbert_ce_default_activation_function", None)
    return activation


#: INSTRUCTOR checkpoints whose Pooling configs say include_prompt true: sentence-transformers leaves
#: the instruction out of their pool by these hub ids, as the models were trained
INSTRUCTOR_HUB_IDS = frozenset(("hkunlp/instructor-base", "hkunlp/instructor-large", "hkunlp/instructor-xl"))


def with_hub_id_rules(spec: ModelSpec, model: str) -> ModelSpec:
    """``spec`` as sentence-transformers loads the folder under the name ``model`` was given by:
    INSTRUCTOR's hub ids pool without their instruction; another INSTRUCTOR folder that pools it
    is said to differ from how those models were trained (its Pooling config decides, as there)."""
    if model in INSTRUCTOR_HUB_IDS:
        spec.include_prompt = False
    elif spec.include_prompt and "instructor" in Path(model).name.lower():
        logger.warning(
            "%s: INSTRUCTOR models pool without their instruction; this folder's Pooling config "
            "says include_prompt true (set it false in its 1_Pooling/config.json)",
            model,
        )
    return spec


def _default_prompt_name(st_config: dict[str, Any], prompts: dict[str, str], folder: Path) -> str | None:
    """The prompt every text gets unless a call says otherwise; one the folder does not hold is
    refused, as sentence-transformers refuses it (read as no prompt, every vector came out other)."""
    name = st_config.get("default_prompt_name")
    if name is not None and name not in prompts:
        raise ModelLoadError(
            f"{folder}: default_prompt_name {name!r} is not one of the folder's prompts "
            f"({', '.join(map(repr, prompts)) or 'none'}) in config_sentence_transformers.json"
        )
    return name


def _positive_count(st_config: dict[str, Any], key: str, folder: Path) -> int | None:
    """A count config_sentence_transformers.json may hold (``truncate_dim``: the size ``encode``
    cuts vectors to; ``max_active_dims``: the weights a SparseEncoder keeps), or ``None``."""
    value = st_config.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ModelLoadError(f"{folder}: {key} {value!r} is not a positive integer")
    return value


def _splade(
    folder_splade: SpladeSpec | None,
    st_config: dict[str, Any],
    hf_config: PretrainedConfig,
    architecture: str,
    folder: Path,
) -> SpladeSpec | None:
    """The SparseEncoder's pooling with its ``max_active_dims`` (what its vectors keep when a call
    does not say); under vLLM's name, vLLM's pooling, which reads no sentence-transformers file."""
    if VLLM_SPARSE_NAMES.get(architecture) is ModelKind.SPLADE:
        ends = (getattr(hf_config, "cls_token_id", None), getattr(hf_config, "sep_token_id", None))
        return SpladeSpec(dropped_ends=ends)
    value = _positive_count(st_config, "max_active_dims", folder)
    if folder_splade is None or value is None:
        return folder_splade
    return replace(folder_splade, max_active_dims=value)


def _splade_from_st(cfg: dict[str, Any], folder: Path) -> SpladeSpec:
    strategy = str(cfg.get("pooling_strategy", "max"))
    activation = str(cfg.get("activation_function", "relu"))
    if strategy not in ("max", "sum"):
        raise ModelLoadError(f"{folder}: SPLADE pooling_strategy {strategy!r} is not 'max' or 'sum'")
    if activation not in ("relu", "log1p_relu"):
        raise ModelLoadError(f"{folder}: SPLADE activation_function {activation!r} is not supported")
    return SpladeSpec(strategy, activation)


def _lexical_heads(folder: Path) -> LexicalHeadsSpec | None:
    """BGE-M3's heads when both files are there (one alone is a folder we cannot read fully)."""
    sparse, colbert = folder / "sparse_linear.pt", folder / "colbert_linear.pt"
    if sparse.is_file() and colbert.is_file():
        return LexicalHeadsSpec(sparse, colbert)
    if sparse.is_file() or colbert.is_file():
        logger.warning("%s has only one of sparse_linear.pt / colbert_linear.pt; ignoring it", folder)
    return None


def _pylate_colbert(st_config: dict[str, Any]) -> ColbertSpec:
    def setting(key: str, default: Any) -> Any:
        """PyLate's default stands only for a key absent or null: an empty skiplist keeps every token."""
        value = st_config.get(key)
        return default if value is None else value

    return ColbertSpec(
        query_prefix=setting("query_prefix", "[Q] ") or None,
        document_prefix=setting("document_prefix", "[D] ") or None,
        query_length=int(setting("query_length", 32)),
        document_length=int(setting("document_length", 180)),
        attend_to_expansion_tokens=bool(setting("attend_to_expansion_tokens", False)),
        do_query_expansion=bool(setting("do_query_expansion", True)),
        skiplist_words=tuple(setting("skiplist_words", string.punctuation)),
    )


def _stanford_colbert(path: Path) -> tuple[ColbertSpec, list[DenseSpec]]:
    """Stanford ``HF_ColBERT``: BERT under ``bert.`` plus ``linear.weight``, settings in artifact.metadata."""
    meta = _read_json(path / "artifact.metadata") or {}
    assert isinstance(meta, dict)
    weights = path / "model.safetensors"
    if not weights.is_file():
        raise ModelLoadError(f"{path}: HF_ColBERT folder without model.safetensors")
    from safetensors import safe_open

    with safe_open(str(weights), framework="pt") as handle:
        if "linear.weight" not in handle.keys():  # noqa: SIM118 (safe_open is not iterable)
            raise ModelLoadError(f"{path}: HF_ColBERT checkpoint has no linear.weight projection")
    spec = ColbertSpec(
        query_prefix=meta.get("query_token_id", "[unused0]"),
        document_prefix=meta.get("doc_token_id", "[unused1]"),
        query_length=int(meta.get("query_maxlen", 32)),
        document_length=int(meta.get("doc_maxlen", 180)),
        attend_to_expansion_tokens=bool(meta.get("attend_to_mask_tokens", False)),
        do_query_expansion=True,
        skiplist_words=tuple(string.punctuation) if meta.get("mask_punctuation", True) else (),
    )
    return spec, [checkpoint_projection(path, weights, "linear.weight", bias=False)]
