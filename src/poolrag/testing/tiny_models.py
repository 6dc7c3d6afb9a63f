"""Tiny randomly initialised models, built on disk per test, for parity against the references.

Every architecture uses the all-MiniLM-L6-v2 WordPiece tokenizer ([PAD]=0, [CLS]=101, [SEP]=102,
[MASK]=103): the model does not care which tokenizer produced its ids, and one vocabulary keeps the
folders small. Special-token ids in each config are set to match it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
import transformers

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")
ENCODER_ARCHS = ("bert", "roberta", "xlm-roberta", "distilbert", "mpnet", "modernbert")
HIDDEN = 32
#: the layers of every tiny transformer (an encoder, each tower of a dual encoder, a page retriever's)
_TOWER = {"hidden_size": HIDDEN, "intermediate_size": 37, "num_hidden_layers": 2, "num_attention_heads": 2}

# mixed lengths (and a duplicate) so that batching, padding and dedupe all matter
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Hi",
    "Pooling models turn text into vectors; rerankers turn pairs into scores.",
    "A much longer sentence that goes on and on, with commas, clauses and more words than the others "
    "so that the batch mixes very different lengths and padding matters a great deal.",
    "Hi",
]


def _config(arch: str, **extra: object) -> transformers.PretrainedConfig:
    common = {"vocab_size": 30522, "pad_token_id": 0} | extra
    if arch == "distilbert":
        return transformers.DistilBertConfig(dim=HIDDEN, n_layers=2, n_heads=2, hidden_dim=37, **common)
    if arch == "modernbert":
        ids = {"cls_token_id": 101, "sep_token_id": 102, "bos_token_id": 101, "eos_token_id": 102}
        sizes = _TOWER | {"intermediate_size": 40, "max_position_embeddings": 512}
        return transformers.ModernBertConfig(**(sizes | ids | common))
    cls = {
        "bert": transformers.BertConfig,
        "roberta": transformers.RobertaConfig,
        "xlm-roberta": transformers.XLMRobertaConfig,
        "mpnet": transformers.MPNetConfig,
    }[arch]
    sizes = _TOWER | {"max_position_embeddings": 514, "bos_token_id": 101, "eos_token_id": 102}
    return cls(**(sizes | common))


def copy_tokenizer(src: Path, dest: Path) -> None:
    for name in TOKENIZER_FILES:
        if (src / name).exists():
            shutil.copy(src / name, dest / name)


def build_encoder(
    dest: Path,
    arch: str,
    tokenizer_src: Path,
    head: str | None = None,
    num_labels: int = 2,
    seed: int = 0,
    shard_size: str = "5GB",
    **config_extra: object,
) -> Path:
    """Save a tiny ``arch`` model (bare backbone, or with a ``"sequence"``/``"token"`` head)."""
    torch.manual_seed(seed)
    config = _config(arch, **config_extra)
    if head is None:
        model = transformers.AutoModel.from_config(config)
    else:
        config.num_labels = num_labels
        config.id2label = {i: f"LABEL_{i}" for i in range(num_labels)}
        config.label2id = {v: k for k, v in config.id2label.items()}
        auto = {
            "sequence": transformers.AutoModelForSequenceClassification,
            "token": transformers.AutoModelForTokenClassification,
        }[head]
        model = auto.from_config(config)
    _randomise_biases_and_norms(model)
    model.eval().save_pretrained(dest, max_shard_size=shard_size)
    copy_tokenizer(tokenizer_src, dest)
    return dest


def _randomise_biases_and_norms(model: torch.nn.Module) -> None:
    """transformers initialises biases to 0 and norms to 1/0: a reimplementation that swapped or
    dropped them would still agree. Random values make every parameter count."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("bias"):
                param.normal_(0.0, 0.1)
            elif "norm" in name.lower() and name.endswith("weight"):
                param.normal_(1.0, 0.1)


def write_sentence_transformers(
    folder: Path,
    pooling: str = "mean",
    dense_out: int | None = None,
    dense_activation: str = "torch.nn.modules.activation.Tanh",
    normalize: bool = False,
    prompts: dict[str, str] | None = None,
    max_seq_length: int = 128,
    seed: int = 1,
    include_prompt: bool = True,
    default_prompt_name: str | None = None,
) -> Path:
    """Turn a saved backbone folder into a sentence-transformers folder (Pooling, Dense, Normalize)
    by saving a real ``SentenceTransformer`` built on it with the pinned sentence-transformers, so
    the folder has exactly the files and ``modules.json`` names that version writes (a hand-written
    folder keeps old names, so a release that renames every module would go unnoticed)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense, Normalize, Pooling, Transformer

    remote = "auto_map" in json.loads((folder / "config.json").read_text())
    code = {"trust_remote_code": True} if remote else {}
    transformer = Transformer(
        str(folder),
        max_seq_length=max_seq_length,
        model_kwargs=code,
        processor_kwargs=code,
        config_kwargs=code,
    )
    pooled = Pooling(transformer.get_embedding_dimension(), pooling, include_prompt=include_prompt)
    modules: list[torch.nn.Module] = [transformer, pooled]
    if dense_out is not None:
        torch.manual_seed(seed)
        activation = getattr(torch.nn, dense_activation.rsplit(".", 1)[-1])()
        dense = Dense(transformer.get_embedding_dimension(), dense_out, activation_function=activation)
        with torch.no_grad():
            dense.linear.bias.normal_(0.0, 0.1)  # a reimplementation that dropped the bias would differ
        modules.append(dense)
    if normalize:
        modules.append(Normalize())
    model = SentenceTransformer(
        modules=modules,
        device="cpu",
        prompts=prompts,
        default_prompt_name=default_prompt_name,
        similarity_fn_name="cosine",
    )
    saved = folder.with_name(folder.name + ".st-save")
    model.save(str(saved))
    shutil.copytree(saved, folder, dirs_exist_ok=True)  # the backbone's own extra files stay
    shutil.rmtree(saved)
    return folder


def write_legacy_sentence_transformers_names(folder: Path) -> Path:
    """Rewrite a saved folder's ``modules.json`` to the names sentence-transformers 2.x-5.x wrote
    (``sentence_transformers.models.Pooling``, ...), the form most hub folders still carry."""
    modules = json.loads((folder / "modules.json").read_text())
    for module in modules:
        module["type"] = "sentence_transformers.models." + module["type"].rsplit(".", 1)[-1]
    (folder / "modules.json").write_text(json.dumps(modules))
    return folder


def build_splade(
    dest: Path,
    tokenizer_src: Path,
    pooling_strategy: str = "max",
    activation_function: str = "relu",
    legacy_module: bool = False,
    seed: int = 0,
) -> Path:
    """A tiny random BertForMaskedLM saved by sentence-transformers as a ``SparseEncoder``
    (transformer with the fill-mask task + ``SpladePooling``), the layout SPLADE checkpoints ship in.

    ``legacy_module`` saves it through the older ``MLMTransformer`` module instead.
    """
    from sentence_transformers import SparseEncoder
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sparse_encoder.modules import MLMTransformer, SpladePooling

    raw = dest / "raw"
    raw.mkdir(parents=True)
    torch.manual_seed(seed)
    model = transformers.BertForMaskedLM(_config("bert"))
    _randomise_biases_and_norms(model)
    model.eval().save_pretrained(raw)
    copy_tokenizer(tokenizer_src, raw)
    if legacy_module:
        transformer = MLMTransformer(str(raw))
    else:
        transformer = Transformer(str(raw), transformer_task="fill-mask")
    pooling = SpladePooling(pooling_strategy=pooling_strategy, activation_function=activation_function)
    encoder = SparseEncoder(modules=[transformer, pooling], device="cpu")
    folder = dest / "splade"
    encoder.save(str(folder))
    shutil.rmtree(raw)
    return folder


def build_bge_m3(dest: Path, tokenizer_src: Path, colbert_dim: int = 24, seed: int = 0) -> Path:
    """A tiny random XLM-RoBERTa in BGE-M3's layout: the backbone, sentence-transformers CLS pooling +
    Normalize, and the two heads as plain state dicts (``sparse_linear.pt`` [H→1],
    ``colbert_linear.pt`` [H→colbert_dim]) with random weights and biases."""
    build_encoder(dest, "xlm-roberta", tokenizer_src, seed=seed)
    write_sentence_transformers(dest, pooling="cls", normalize=True)
    torch.manual_seed(seed + 7)
    sparse = torch.nn.Linear(HIDDEN, 1)
    colbert = torch.nn.Linear(HIDDEN, colbert_dim)
    tokenizer = transformers.AutoTokenizer.from_pretrained(dest)
    backbone = transformers.AutoModel.from_pretrained(dest).eval()
    with torch.no_grad():
        sparse.weight.normal_(0.0, 1.0)
        colbert.bias.normal_(0.0, 0.1)
        states = backbone(**tokenizer(SENTENCES, padding=True, return_tensors="pt")).last_hidden_state
        # centre the raw weights on these texts: about half the tokens weigh > 0, the rest are dropped
        sparse.bias.fill_(-float(sparse(states).median()))
    torch.save(sparse.state_dict(), dest / "sparse_linear.pt")
    torch.save(colbert.state_dict(), dest / "colbert_linear.pt")
    return dest


#: the image tower of the tiny dual encoders and page retrievers: 32 px, 8 px patches
_VISION = _TOWER | {"image_size": 32, "patch_size": 8}


def build_clip(
    dest: Path, tokenizer_src: Path, seed: int = 0, image_size: int = 32, **vision_config: object
) -> Path:
    """A tiny random ``CLIPModel`` saved with transformers' ``save_pretrained``, its
    ``CLIPImageProcessor`` beside it (``image_size`` pixels square, 8-pixel patches at 32, 4 x 4 patches
    at any size; ``vision_config`` overrides the image tower's) and the MiniLM tokenizer
    ([SEP] is the end-of-text token CLIP's text tower pools)."""
    dest.mkdir(parents=True, exist_ok=True)
    copy_tokenizer(tokenizer_src, dest)
    text = _TOWER | {"vocab_size": 30522, "max_position_embeddings": 77, "pad_token_id": 0}
    text |= {"bos_token_id": 101, "eos_token_id": 102}
    torch.manual_seed(seed)
    vision = _VISION | {"image_size": image_size, "patch_size": image_size // 4} | vision_config
    config = transformers.CLIPConfig(text_config=text, vision_config=vision, projection_dim=16)
    transformers.CLIPModel(config).eval().save_pretrained(dest)
    processor = transformers.CLIPImageProcessor(
        size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size}
    )
    processor.save_pretrained(dest)
    return dest


def build_siglip(dest: Path, tokenizer_src: Path, seed: int = 0) -> Path:
    """A tiny random ``SiglipModel`` saved with its ``SiglipImageProcessor`` (32 x 32 pixels,
    8-pixel patches) and the MiniLM tokenizer; texts are 16 positions long, as SigLIP's are 64."""
    dest.mkdir(parents=True, exist_ok=True)
    copy_tokenizer(tokenizer_src, dest)
    text = _TOWER | {"vocab_size": 30522, "max_position_embeddings": 16, "pad_token_id": 0}
    torch.manual_seed(seed)
    config = transformers.SiglipConfig(text_config=text, vision_config=_VISION)
    transformers.SiglipModel(config).eval().save_pretrained(dest)
    transformers.SiglipImageProcessor(size={"height": 32, "width": 32}).save_pretrained(dest)
    return dest


def build_siglip2(dest: Path, tokenizer_src: Path, seed: int = 0) -> Path:
    """A tiny random ``Siglip2Model`` saved with its ``Siglip2ImageProcessor`` (8-pixel patches, at
    most 16 a picture, at the picture's own aspect ratio) and the MiniLM tokenizer; texts are 16
    positions long."""
    dest.mkdir(parents=True, exist_ok=True)
    copy_tokenizer(tokenizer_src, dest)
    text = _TOWER | {"vocab_size": 30522, "max_position_embeddings": 16, "pad_token_id": 0}
    torch.manual_seed(seed)
    config = transformers.Siglip2Config(
        text_config=text, vision_config=_TOWER | {"patch_size": 8, "num_patches": 16}
    )
    transformers.Siglip2Model(config).eval().save_pretrained(dest)
    transformers.Siglip2ImageProcessor(patch_size=8, max_num_patches=16).save_pretrained(dest)
    return dest


def build_colpali(dest: Path, tokenizer_src: Path, seed: int = 0) -> Path:
    """A tiny random ``ColPaliForRetrieval`` (a PaliGemma of a 2-layer Gemma and a 2-layer SigLIP
    vision tower, 32 x 32 pages in 16 patches, 16-dim token vectors) saved with transformers'
    ``save_pretrained``, and its ``ColPaliProcessor`` saved beside it: the MiniLM tokenizer with
    ``<image>`` added and ``[CLS]`` as the beginning of text PaliGemma's prompt starts with."""
    dest.mkdir(parents=True, exist_ok=True)
    tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_src)
    tokenizer.add_special_tokens({"bos_token": "[CLS]", "additional_special_tokens": ["<image>"]})
    image_token = tokenizer.convert_tokens_to_ids("<image>")
    text = _TOWER | {"vocab_size": len(tokenizer), "num_key_value_heads": 1, "head_dim": 16}
    text |= {"max_position_embeddings": 128, "pad_token_id": 0, "bos_token_id": 101, "eos_token_id": 102}
    vision = _VISION | {"projection_dim": HIDDEN}
    vlm = transformers.PaliGemmaConfig(
        text_config=text, vision_config=vision, image_token_index=image_token, projection_dim=HIDDEN
    )
    torch.manual_seed(seed)
    transformers.ColPaliForRetrieval(
        transformers.ColPaliConfig(vlm_config=vlm, embedding_dim=16)
    ).eval().save_pretrained(dest)
    images = transformers.SiglipImageProcessor(size={"height": 32, "width": 32}, image_seq_length=16)
    transformers.ColPaliProcessor(image_processor=images, tokenizer=tokenizer).save_pretrained(dest)
    return dest


def build_colqwen2(dest: Path, tokenizer_src: Path, seed: int = 0) -> Path:
    """A tiny random ``ColQwen2ForRetrieval`` (a 2-layer Qwen2-VL: 8-pixel patches merged 2 x 2,
    pages of 256 to 4,096 pixels at their own aspect ratio, 16-dim token vectors) saved with
    ``save_pretrained``, and its ``ColQwen2Processor`` beside it: the MiniLM tokenizer with Qwen2-VL's
    chat and vision tokens added."""
    dest.mkdir(parents=True, exist_ok=True)
    tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_src)
    names = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|vision_start|>", "<|vision_end|>"]
    names += ["<|image_pad|>", "<|video_pad|>"]
    tokenizer.add_special_tokens({"additional_special_tokens": names})
    ids = {name: tokenizer.convert_tokens_to_ids(name) for name in names}
    text = _TOWER | {"vocab_size": len(tokenizer), "num_key_value_heads": 1, "max_position_embeddings": 512}
    text |= {"pad_token_id": 0, "bos_token_id": 101, "eos_token_id": 102}
    text |= {"rope_scaling": {"type": "mrope", "mrope_section": [2, 2, 4]}}
    vision = {"depth": 2, "embed_dim": HIDDEN, "hidden_size": HIDDEN, "num_heads": 2, "mlp_ratio": 2}
    vision |= {"patch_size": 8, "spatial_merge_size": 2, "temporal_patch_size": 2}
    vlm = transformers.Qwen2VLConfig(
        bos_token_id=101,
        eos_token_id=102,
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    torch.manual_seed(seed)
    config = transformers.ColQwen2Config(vlm_config=vlm, embedding_dim=16)
    transformers.ColQwen2ForRetrieval(config).eval().save_pretrained(dest)
    images = transformers.Qwen2VLImageProcessor(
        min_pixels=256, max_pixels=64 * 64, patch_size=8, merge_size=2, temporal_patch_size=2
    )
    transformers.ColQwen2Processor(image_processor=images, tokenizer=tokenizer).save_pretrained(dest)
    return dest


def build_colmodernvbert(dest: Path, tokenizer_src: Path, seed: int = 0) -> Path:
    """A tiny random ``ColModernVBertForRetrieval`` (a 2-layer ModernBERT reading a 2-layer SigLIP
    vision tower through a 2 x 2 pixel shuffle: 4 tokens per 32-pixel tile; a page is cut into tiles
    of up to 64 pixels a side, plus a global view) saved with ``save_pretrained``, and its
    ``ColModernVBertProcessor`` beside it: the MiniLM tokenizer with Idefics3's image tokens added."""
    dest.mkdir(parents=True, exist_ok=True)
    tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_src)
    names = ["<image>", "<fake_token_around_image>", "<global-img>", "<end_of_utterance>"]
    tokenizer.add_special_tokens({"additional_special_tokens": names})
    text = _TOWER | {"vocab_size": len(tokenizer), "pad_token_id": 0, "max_position_embeddings": 512}
    text |= {"bos_token_id": 101, "eos_token_id": 102, "sep_token_id": 102, "cls_token_id": 101}
    vlm = transformers.ModernVBertConfig(
        text_config=text,
        vision_config=_VISION,
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        pixel_shuffle_factor=2,
    )
    torch.manual_seed(seed)
    config = transformers.ColModernVBertConfig(vlm_config=vlm, embedding_dim=16)
    transformers.ColModernVBertForRetrieval(config).eval().save_pretrained(dest)
    images = transformers.Idefics3ImageProcessor(
        do_image_splitting=True, max_image_size={"longest_edge": 32}, size={"longest_edge": 64}
    )
    processor = transformers.ColModernVBertProcessor(
        image_processor=images, tokenizer=tokenizer, image_seq_len=4
    )
    processor.save_pretrained(dest)
    return dest
