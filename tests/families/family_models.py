"""One tiny model per row of docs/models.md, with the calls its front doors are compared on.

Each builder saves a folder and returns a :class:`Family`: the ``Engine`` options, the same
options as vLLM's ``LLM`` takes them, the task calls to compare (offline and over HTTP), and a
reference check returning the largest absolute difference between the engine and what the
checkpoint's own stack computes (transformers, sentence-transformers, or the published procedure
by hand). The folders and references reuse the builders of the per-family parity tests.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers
from decoders.decoder_remote_code import (
    internlm2_reward_model,
    llama_bidirectional_reranker,
    qwen2_reward_model,
)
from decoders.reranker_prompts import qwen3_reranker_prompt
from decoders.tiny_decoders import (
    PAD,
    TEXTS,
    build,
    build_jamba_classifier,
    build_tokenizer,
    normalize,
    ref_last_hidden,
    ref_sequence_logits,
    ref_token_logits,
    run_padded,
    softmax,
    tiny_config,
)
from engine import test_colbert as colbert
from engine import test_families_colbert as named_colbert
from engine import test_remote_code as remote_code
from engine.test_families_bidirectional import _without_code

from poolrag import Engine, PoolingParams
from poolrag.testing.tiny_models import SENTENCES, build_encoder, write_sentence_transformers

QUERY = "What is a panda?"
STEPS = [
    "Step 1: add two and three ки Step 2: multiply by four ки the answer is twenty ки",
    "What is a panda? ки",
    "no steps here",
    " ".join(["Step 1: add two and three ки"] * 8),
]
RERANKER_INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"
QWEN3_QUERY_PROMPT = (
    "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:"
)


@dataclass(frozen=True)
class Call:
    """One task call: ``texts`` (and ``query`` for ``score``), with an optional ``input_type``."""

    task: str
    texts: tuple[str, ...]
    query: str | None = None
    input_type: str | None = None

    @property
    def label(self) -> str:
        return self.task + (f"[{self.input_type}]" if self.input_type else "")


@dataclass
class Family:
    folder: Path
    engine_options: dict[str, Any]
    llm_options: dict[str, Any]
    calls: tuple[Call, ...]
    reference: Callable[[Engine], float]  # the engine's max abs difference from the reference


def _max_diff(ours: Sequence[np.ndarray] | np.ndarray, expected: Sequence[np.ndarray] | np.ndarray) -> float:
    ours, expected = list(ours), list(expected)
    assert len(ours) == len(expected)
    worst = 0.0
    for a, b in zip(ours, expected, strict=True):
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        assert a.shape == b.shape, (a.shape, b.shape)
        if a.size:
            worst = max(worst, float(np.abs(a - b).max()))
    return worst


def _config_values(vocab_size: int, family: str) -> dict:
    values = tiny_config(family, vocab_size).to_dict()
    for key in ("architectures", "transformers_version", "auto_map"):
        values.pop(key, None)
    return values


def _ids(tokenizer, texts: Sequence[str]) -> list[list[int]]:
    return [tokenizer(t)["input_ids"] for t in texts]


def _logits(out, batch, last):
    return out.logits.float().numpy()


def _same(options: dict[str, Any]) -> dict[str, Any]:
    """LLM options equal to the Engine's (no vLLM-only spelling involved)."""
    return dict(options)


# -- encoders --------------------------------------------------------------------------------------
def encoder_embedder(root: Path, tokenizer_src: Path) -> Family:
    """Bert backbone in a sentence-transformers folder (mean pooling, Normalize)."""
    from sentence_transformers import SentenceTransformer

    folder = build_encoder(root / "bert-st", "bert", tokenizer_src)
    write_sentence_transformers(folder, pooling="mean", normalize=True)

    def reference(engine: Engine) -> float:
        expected = SentenceTransformer(str(folder), device="cpu").encode(SENTENCES)
        return _max_diff(engine.embed_array(SENTENCES), expected)

    texts = tuple(SENTENCES)
    calls = (Call("embed", texts), Call("score", texts, query=QUERY), Call("token_embed", texts[:3]))
    return Family(folder, {}, {}, calls, reference)


def _encoder_logits(folder: Path, auto_class, texts, pairs=None) -> list[np.ndarray]:
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = auto_class.from_pretrained(folder).eval()
    out = []
    with torch.no_grad():
        for i, text in enumerate(texts):
            enc = (
                tokenizer(text, pairs[i], return_tensors="pt")
                if pairs
                else tokenizer(text, return_tensors="pt")
            )
            out.append(model(**enc).logits[0].numpy())
    return out


def remote_code_encoder(root: Path, tokenizer_src: Path) -> Family:
    """A backbone that exists only as remote code (``auto_map``), in a sentence-transformers folder."""
    from sentence_transformers import SentenceTransformer

    folder = remote_code.write_remote_encoder(root / "remote-encoder", tokenizer_src)
    write_sentence_transformers(folder, pooling="mean", normalize=True)

    def reference(engine: Engine) -> float:
        st = SentenceTransformer(str(folder), device="cpu", trust_remote_code=True)
        return _max_diff(engine.embed_array(SENTENCES), st.encode(SENTENCES))

    options = {"trust_remote_code": True}
    texts = tuple(SENTENCES)
    calls = (Call("embed", texts), Call("score", texts, query=QUERY), Call("token_embed", texts[:2]))
    return Family(folder, options, _same(options), calls, reference)


def encoder_cross_encoder(root: Path, tokenizer_src: Path) -> Family:
    """One-label BertForSequenceClassification: score, classify and reward."""
    from sentence_transformers import CrossEncoder

    folder = build_encoder(root / "bert-ce", "bert", tokenizer_src, head="sequence", num_labels=1)
    texts = tuple(SENTENCES)

    def reference(engine: Engine) -> float:
        expected = CrossEncoder(str(folder), device="cpu").predict([(QUERY, t) for t in texts])
        return _max_diff([s.outputs.score for s in engine.score(QUERY, list(texts))], expected)

    calls = (Call("score", texts, query=QUERY), Call("classify", texts), Call("reward", texts))
    return Family(folder, {}, {}, calls, reference)


def encoder_classifier(root: Path, tokenizer_src: Path) -> Family:
    """Three-label RobertaForSequenceClassification."""
    folder = build_encoder(root / "roberta-cls", "roberta", tokenizer_src, head="sequence", num_labels=3)
    texts = tuple(SENTENCES)

    def reference(engine: Engine) -> float:
        logits = _encoder_logits(folder, transformers.AutoModelForSequenceClassification, texts)
        return _max_diff(
            [o.outputs.probs for o in engine.classify(list(texts))], [softmax(x) for x in logits]
        )

    return Family(folder, {}, {}, (Call("classify", texts),), reference)


def token_classifier(root: Path, tokenizer_src: Path) -> Family:
    """Five-label BertForTokenClassification: token_classify and vLLM's per-token reward."""
    folder = build_encoder(root / "bert-tok", "bert", tokenizer_src, head="token", num_labels=5)
    texts = tuple(SENTENCES)

    def reference(engine: Engine) -> float:
        logits = _encoder_logits(folder, transformers.AutoModelForTokenClassification, texts)
        return _max_diff(
            [o.outputs.data for o in engine.token_classify(list(texts))], [softmax(x) for x in logits]
        )

    return Family(folder, {}, {}, (Call("token_classify", texts), Call("reward", texts)), reference)


# -- ColBERT -----------------------------------------------------------------------------------------
def _colbert_calls(queries: Sequence[str], documents: Sequence[str]) -> tuple[Call, ...]:
    return (
        Call("token_embed", tuple(queries), input_type="query"),
        Call("token_embed", tuple(documents), input_type="document"),
        Call("score", tuple(documents), query=queries[0]),
    )


def colbert_layout(root: Path, tiny_model, layout: str) -> Family:
    """PyLate folder (Dense module, settings file) or Stanford ``HF_ColBERT`` (``linear.weight``)."""
    pylate = colbert._pylate_folder(tiny_model, root)
    folder = pylate if layout == "pylate" else colbert._stanford_folder(pylate, root)

    def reference(engine: Engine) -> float:
        ours, expected = [], []
        for is_query, texts in ((True, colbert.QUERIES), (False, colbert.DOCUMENTS)):
            params = PoolingParams(input_type="query" if is_query else "document")
            ours += [o.outputs.data for o in engine.encode(texts, "token_embed", params)]
            expected += [colbert._reference(pylate, t, is_query) for t in texts]
        return _max_diff(ours, expected)

    return Family(folder, {}, {}, _colbert_calls(colbert.QUERIES, colbert.DOCUMENTS), reference)


def colbert_by_name(root: Path, tiny_model, architecture: str) -> Family:
    """``ColBERTModernBertModel`` / ``ColBERTJinaRobertaModel``: the projection in the checkpoint."""
    backbone, key, prefix = named_colbert.CASES[architecture]
    folder, weight = named_colbert._with_projection(tiny_model(backbone), root / architecture, key, prefix)
    overrides = {"hf_overrides": {"architectures": [architecture]}}
    texts = named_colbert.TEXTS

    def reference(engine: Engine) -> float:
        ours, expected = [], []
        for input_type in ("query", "document"):
            outputs = engine.encode(texts, "token_embed", PoolingParams(input_type=input_type))
            ours += [o.outputs.data for o in outputs]
            expected += [named_colbert._reference(folder, weight, t, input_type == "query") for t in texts]
        return _max_diff(ours, expected)

    return Family(folder, overrides, _same(overrides), _colbert_calls(texts[:1], texts), reference)


# -- decoders ------------------------------------------------------------------------------------------
def decoder_embedder(root: Path) -> Family:
    """Qwen3Model backbone: LAST pooling, normalised."""
    folder = root / "qwen3-base"
    model, tokenizer = build(folder, "qwen3", transformers.AutoModel)

    def reference(engine: Engine) -> float:
        expected = normalize(ref_last_hidden(model, _ids(tokenizer, TEXTS), PAD, None))
        return _max_diff(engine.embed_array(TEXTS), expected)

    calls = (
        Call("embed", tuple(TEXTS)),
        Call("score", tuple(TEXTS), query=QUERY),
        Call("token_embed", ("hi",)),
    )
    return Family(folder, {}, {}, calls, reference)


def st_decoder_folder(root: Path) -> Family:
    """Qwen3-Embedding layout saved by sentence-transformers itself (it keeps the Qwen3Model backbone
    of the Qwen3ForCausalLM checkpoint), last-token pooling, a query prompt."""
    from sentence_transformers import SentenceTransformer

    folder = root / "qwen3-st"
    build(folder, "qwen3", transformers.AutoModelForCausalLM, tokenizer_kwargs={"add_eos": True})
    write_sentence_transformers(
        folder,
        pooling="lasttoken",
        normalize=True,
        prompts={"query": QWEN3_QUERY_PROMPT, "document": ""},
        max_seq_length=512,
    )
    queries = ("What is a panda?", "capital of France")

    def reference(engine: Engine) -> float:
        st = SentenceTransformer(str(folder), device="cpu")
        ours = list(engine.embed_array(list(queries), PoolingParams(input_type="query")))
        ours += list(engine.embed_array(TEXTS, PoolingParams(input_type="document")))
        expected = list(st.encode(list(queries), prompt_name="query")) + list(st.encode(TEXTS))
        return _max_diff(ours, expected)

    calls = (
        Call("embed", queries, input_type="query"),
        Call("embed", tuple(TEXTS), input_type="document"),
        Call("score", tuple(TEXTS), query=queries[0]),
    )
    return Family(folder, {}, {}, calls, reference)


def convert_embed(root: Path) -> Family:
    """LlamaForCausalLM with ``convert='embed'``: the backbone's last hidden state."""
    folder = root / "llama-lm"
    model, tokenizer = build(folder, "llama", transformers.AutoModelForCausalLM)

    def reference(engine: Engine) -> float:
        expected = normalize(ref_last_hidden(model.model, _ids(tokenizer, TEXTS), PAD, None))
        return _max_diff(engine.embed_array(TEXTS), expected)

    calls = (Call("embed", tuple(TEXTS)), Call("score", tuple(TEXTS), query=QUERY))
    return Family(folder, {"convert": "embed"}, {"convert": "embed"}, calls, reference)


def decoder_classifier(root: Path) -> Family:
    """Three-label Qwen2ForSequenceClassification, read at the last real token."""
    folder = root / "qwen2-cls"
    labels = {0: "negative", 1: "neutral", 2: "positive"}
    model, tokenizer = build(
        folder, "qwen2", transformers.AutoModelForSequenceClassification, num_labels=3, id2label=labels
    )

    def reference(engine: Engine) -> float:
        expected = softmax(ref_sequence_logits(model, _ids(tokenizer, TEXTS), PAD, None))
        return _max_diff([o.outputs.probs for o in engine.classify(TEXTS)], expected)

    return Family(folder, {}, {}, (Call("classify", tuple(TEXTS)),), reference)


def decoder_classifier_per_token(root: Path) -> Family:
    """Qwen2ForSequenceClassification with ``convert='classify'``: its head on every token too."""
    folder = root / "qwen2-cls-tokens"
    model, tokenizer = build(folder, "qwen2", transformers.AutoModelForSequenceClassification, num_labels=3)

    def reference(engine: Engine) -> float:
        expected = []
        for seq in _ids(tokenizer, TEXTS):
            with torch.no_grad():
                hidden = model.model(torch.tensor([seq])).last_hidden_state[0]
                expected.append(softmax(model.score(hidden).numpy()))
        return _max_diff([o.outputs.data for o in engine.encode(TEXTS, "token_classify")], expected)

    options = {"convert": "classify"}
    calls = (Call("classify", tuple(TEXTS)), Call("token_classify", tuple(TEXTS)))
    return Family(folder, options, _same(options), calls, reference)


def decoder_reward_classifier(root: Path) -> Family:
    """One-label LlamaForSequenceClassification: a sequence reward model that also scores pairs."""
    folder = root / "llama-rm"
    model, tokenizer = build(folder, "llama", transformers.AutoModelForSequenceClassification, num_labels=1)

    def reference(engine: Engine) -> float:
        expected = ref_sequence_logits(model, _ids(tokenizer, TEXTS), PAD, None)
        return _max_diff([r.outputs.data for r in engine.reward(TEXTS)], expected)

    calls = (
        Call("reward", tuple(TEXTS)),
        Call("score", tuple(TEXTS), query=QUERY),
        Call("classify", tuple(TEXTS)),
    )
    return Family(folder, {}, {}, calls, reference)


def remote_reward_model(root: Path, layout: str) -> Family:
    """Remote-code Qwen2ForRewardModel (Qwen2.5-Math-RM) or InternLM2ForRewardModel (``v_head``)."""
    folder = root / layout
    tokenizer = build_tokenizer(folder)
    if layout == "qwen2-rm":
        model = qwen2_reward_model(folder, _config_values(len(tokenizer), "qwen2"))
    else:
        model = internlm2_reward_model(folder, _config_values(len(tokenizer), "llama"))
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)

    def reference(engine: Engine) -> float:
        expected = run_padded(model, _ids(tokenizer, TEXTS), PAD, None, _logits)
        return _max_diff([r.outputs.data for r in engine.reward(TEXTS)], expected)

    options = {"trust_remote_code": True}
    calls = (
        Call("reward", tuple(TEXTS)),
        Call("score", tuple(TEXTS), query=QUERY),
        Call("classify", tuple(TEXTS)),
    )
    return Family(folder, options, _same(options), calls, reference)


def llm_reranker(root: Path) -> Family:
    """Qwen3-Reranker recipe: Qwen3ForCausalLM, convert='classify', classifier_from_token, template."""
    folder = root / "qwen3-reranker"
    model, tokenizer = build(
        folder, "qwen3", transformers.AutoModelForCausalLM, tokenizer_kwargs={"add_bos": False}
    )
    tokens = ["no", "yes"]
    options = {
        "convert": "classify",
        "hf_overrides": {"classifier_from_token": tokens},
        "score_template": "qwen3_reranker",
    }

    def reference(engine: Engine) -> float:
        seqs = _ids(tokenizer, [qwen3_reranker_prompt(QUERY, d, RERANKER_INSTRUCTION) for d in TEXTS])
        columns = [tokenizer.convert_tokens_to_ids(t) for t in tokens]
        expected = softmax(ref_token_logits(model, seqs, PAD, None, columns))[:, 1]
        return _max_diff([s.outputs.score for s in engine.score(QUERY, TEXTS)], expected)

    rendered = tuple(qwen3_reranker_prompt(QUERY, d, RERANKER_INSTRUCTION) for d in TEXTS[:2])
    calls = (Call("score", tuple(TEXTS), query=QUERY), Call("classify", rendered))
    return Family(folder, options, _same(options), calls, reference)


def _step_reference(model, tokenizer, tag: int, columns: list[int] | None) -> list[np.ndarray]:
    expected = []
    for text in STEPS:
        ids = torch.tensor([tokenizer(text)["input_ids"]])
        with torch.no_grad():
            logits = model(ids).logits[0]
        rows = logits[ids[0] == tag]
        expected.append(softmax((rows if columns is None else rows[:, columns]).numpy()))
    return expected


def step_reward(root: Path) -> Family:
    """math-shepherd style: MistralForCausalLM, convert='reward', STEP pooling at the ``ки`` tag."""
    folder = root / "mistral-prm"
    model, tokenizer = build(folder, "mistral", transformers.AutoModelForCausalLM)
    tag, good, bad = (tokenizer.convert_tokens_to_ids(t) for t in ("ки", "+", "-"))
    pooler = {"pooling_type": "STEP", "step_tag_id": tag, "returned_token_ids": [good, bad]}

    def reference(engine: Engine) -> float:
        expected = _step_reference(model, tokenizer, tag, [good, bad])
        return _max_diff([r.outputs.data for r in engine.reward(STEPS)], expected)

    engine_options = {"convert": "reward", "pooler_config": pooler}
    llm_options = {"convert": "reward", "pooler_config": json.dumps(pooler)}  # vLLM's JSON string
    return Family(folder, engine_options, llm_options, (Call("reward", tuple(STEPS)),), reference)


def process_reward_model(root: Path) -> Family:
    """Remote-code Qwen2ForProcessRewardModel (Qwen2.5-Math-PRM), step tag from pooler_config."""
    folder = root / "qwen2-prm"
    tokenizer = build_tokenizer(folder)
    model = qwen2_reward_model(folder, _config_values(len(tokenizer), "qwen2"), process=True)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    tag = tokenizer.convert_tokens_to_ids("ки")

    def reference(engine: Engine) -> float:
        expected = _step_reference(model, tokenizer, tag, None)
        return _max_diff([r.outputs.data for r in engine.reward(STEPS)], expected)

    options = {"trust_remote_code": True, "pooler_config": {"step_tag_id": tag}}
    return Family(folder, options, _same(options), (Call("reward", tuple(STEPS)),), reference)


def bidirectional_llama(root: Path, head: str) -> Family:
    """NVIDIA's bidirectional Llama without its remote code: embedder (mean) or reranker (score)."""
    remote = root / "bidirec-remote"
    tokenizer = build_tokenizer(remote)
    model = llama_bidirectional_reranker(remote, _config_values(len(tokenizer), "llama"))
    tokenizer = transformers.AutoTokenizer.from_pretrained(remote)
    if head == "embedder":
        folder = _without_code(remote, root / "embedder", "LlamaBidirectionalModel", "llama")

        def reference(engine: Engine) -> float:
            published = []
            for text in TEXTS:
                with torch.no_grad():
                    hidden = model.model(torch.tensor([tokenizer(text)["input_ids"]])).last_hidden_state[0]
                published.append(hidden.mean(0).numpy())
            return _max_diff(engine.embed_array(TEXTS), normalize(np.stack(published)))

        calls = (
            Call("embed", tuple(TEXTS)),
            Call("score", tuple(TEXTS), query=QUERY),
            Call("token_embed", ("hi",)),
        )
        return Family(folder, {}, {}, calls, reference)

    folder = _without_code(
        remote, root / "reranker", "LlamaBidirectionalForSequenceClassification", "llama_bidirec"
    )

    def reference(engine: Engine) -> float:
        seqs = [tokenizer(QUERY, d)["input_ids"] for d in TEXTS]
        logits = run_padded(model, seqs, PAD, None, _logits)[:, 0]
        return _max_diff([s.outputs.score for s in engine.score(QUERY, TEXTS)], 1 / (1 + np.exp(-logits)))

    calls = (Call("score", tuple(TEXTS), query=QUERY), Call("classify", tuple(TEXTS)))
    return Family(folder, {}, {}, calls, reference)


def jamba_classifier(root: Path) -> Family:
    """JambaForSequenceClassification (attention + Mamba layers; CPU runs the Mamba slow path)."""
    folder = root / "jamba"
    model, tokenizer = build_jamba_classifier(folder)

    def reference(engine: Engine) -> float:
        expected = softmax(run_padded(model, _ids(tokenizer, TEXTS), PAD, None, _logits))
        return _max_diff([o.outputs.probs for o in engine.classify(TEXTS)], expected)

    return Family(folder, {}, {}, (Call("classify", tuple(TEXTS)),), reference)


# family id (the docs/models.md row it stands for) -> builder(root, tokenizer_src, tiny_model)
BUILDERS: dict[str, Callable[[Path, Path, Any], Family]] = {
    "encoder-embedder": lambda root, src, tiny: encoder_embedder(root, src),
    "remote-code-encoder": lambda root, src, tiny: remote_code_encoder(root, src),
    "decoder-embedder": lambda root, src, tiny: decoder_embedder(root),
    "st-decoder-folder": lambda root, src, tiny: st_decoder_folder(root),
    "convert-embed": lambda root, src, tiny: convert_embed(root),
    "colbert-pylate": lambda root, src, tiny: colbert_layout(root, tiny, "pylate"),
    "colbert-stanford": lambda root, src, tiny: colbert_layout(root, tiny, "stanford"),
    "colbert-modernbert": lambda root, src, tiny: colbert_by_name(root, tiny, "ColBERTModernBertModel"),
    "colbert-jina-roberta": lambda root, src, tiny: colbert_by_name(root, tiny, "ColBERTJinaRobertaModel"),
    "encoder-cross-encoder": lambda root, src, tiny: encoder_cross_encoder(root, src),
    "encoder-classifier": lambda root, src, tiny: encoder_classifier(root, src),
    "decoder-classifier": lambda root, src, tiny: decoder_classifier(root),
    "decoder-classifier-convert-classify": lambda root, src, tiny: decoder_classifier_per_token(root),
    "decoder-reward-classifier": lambda root, src, tiny: decoder_reward_classifier(root),
    "remote-code-reward-qwen2": lambda root, src, tiny: remote_reward_model(root, "qwen2-rm"),
    "remote-code-reward-internlm2": lambda root, src, tiny: remote_reward_model(root, "internlm2-rm"),
    "llm-reranker-from-token": lambda root, src, tiny: llm_reranker(root),
    "step-reward-convert": lambda root, src, tiny: step_reward(root),
    "process-reward-model": lambda root, src, tiny: process_reward_model(root),
    "token-classifier": lambda root, src, tiny: token_classifier(root, src),
    "bidirectional-llama-embedder": lambda root, src, tiny: bidirectional_llama(root, "embedder"),
    "bidirectional-llama-reranker": lambda root, src, tiny: bidirectional_llama(root, "reranker"),
    "jamba-classifier": lambda root, src, tiny: jamba_classifier(root),
}
