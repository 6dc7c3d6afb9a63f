"""The GPU path: poolrag in fp16/bf16 vs sentence-transformers fp16, and MFU at 512 tokens.

    python benchmarks/gpu.py [--n 4000] [--passes 5] [--models minilm,bert-base,bert-large]
                             [--mfu-seqs 256] [--json rows.json]

* ``mixed``: embed the deterministic mixed corpus (benchmarks/corpus.py, 5 to ~280 tokens) with
  each model; poolrag at its defaults (bf16 where the GPU has it, token budget 16,384, packed rows
  through flash varlen attention) and in fp16; sentence-transformers in fp16 (``.half()``) at its
  default batch size 32 and at 256. Contenders run interleaved; texts/s are medians of ``--passes``;
  the ratio is poolrag over the faster sentence-transformers row. Each row's smallest cosine to
  sentence-transformers in fp32 on the same GPU says what the half precision costs.
* ``mfu``: ``--mfu-seqs`` sequences of exactly 512 tokens. Model FLOPs per sequence are
  ``layers × (24·s·h² + 4·s²·h)`` (the linear layers plus the two attention products, a
  multiply-add counted as 2); MFU is that rate over the GPU's peak dense bf16/fp16 rate, both the
  datasheet's (``--peak-tflops``, 989 for an H100 SXM) and a large bf16 matrix product measured here.

Models: ``minilm`` is the real all-MiniLM-L6-v2 folder (``POOLRAG_MINILM_DIR`` or the package);
``bert-base`` (768 wide, 12 layers) and ``bert-large`` (1024, 24 layers) are BERT shapes with random
weights and MiniLM's tokenizer, built in a temporary folder with a sentence-transformers mean
pooling module: throughput depends on the shapes, not the weights, and no hub is reachable here.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

# a user's process tokenises on every core (common.py turns that off for the CPU benchmarks, where
# the cores belong to the forward pass); on a GPU host the tokenizer is the CPU's main work
os.environ["TOKENIZERS_PARALLELISM"] = "true"
from common import interleaved, machine, machine_facts, minilm_path, table
from corpus import mixed_corpus

SHAPES = {"bert-base": (768, 12, 12), "bert-large": (1024, 24, 16)}  # hidden, layers, heads
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")


def build_bert(dest: Path, name: str, tokenizer_src: Path) -> Path:
    """A randomly initialised BERT of a real model's shape, saved as a sentence-transformers folder."""
    import transformers

    hidden, layers, heads = SHAPES[name]
    config = transformers.BertConfig(
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        max_position_embeddings=512,
        vocab_size=30522,
    )
    torch.manual_seed(0)
    transformers.BertModel(config, add_pooling_layer=False).eval().save_pretrained(dest)
    for file in TOKENIZER_FILES:
        if (tokenizer_src / file).exists():
            shutil.copy(tokenizer_src / file, dest / file)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    (dest / "modules.json").write_text(json.dumps(modules))
    st_config = {"max_seq_length": 512, "do_lower_case": False}
    (dest / "sentence_bert_config.json").write_text(json.dumps(st_config))
    (dest / "1_Pooling").mkdir(exist_ok=True)
    (dest / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": hidden, "pooling_mode_mean_tokens": True})
    )
    return dest


def _sync(fn: Callable[[], object]) -> Callable[[], object]:
    def run() -> object:
        out = fn()
        torch.cuda.synchronize()
        return out

    return run


def _min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return float((a * b).sum(axis=1).min())


def mixed_rows(name: str, path: Path, n: int, passes: int) -> list[list[object]]:
    from sentence_transformers import SentenceTransformer

    from poolrag import Engine

    texts = mixed_corpus(n)
    auto = Engine(path, device="cuda")
    fp16 = Engine(path, device="cuda", dtype="float16")
    tokens = sum(len(ids) for ids in auto.tokenizer(texts)["input_ids"])
    reference = SentenceTransformer(str(path), device="cuda").encode(texts, batch_size=64)
    st = SentenceTransformer(str(path), device="cuda").half()
    contenders: dict[str, Callable[[], np.ndarray]] = {
        f"poolrag {str(auto.dtype).removeprefix('torch.')}": lambda: auto.embed_array(texts),
        "poolrag float16": lambda: fp16.embed_array(texts),
        "sentence-transformers fp16 b32": lambda: st.encode(texts, batch_size=32),
        "sentence-transformers fp16 b256": lambda: st.encode(texts, batch_size=256),
    }
    cosines = {label: _min_cosine(fn(), reference) for label, fn in contenders.items()}  # also warm-up
    times = interleaved({k: _sync(v) for k, v in contenders.items()}, passes, warmup=0)
    st_best = min(t for label, t in times.items() if label.startswith("sentence"))
    return [
        [name, label, n, tokens, n / t, tokens / t, st_best / t, cosines[label]] for label, t in times.items()
    ]


def measured_peak_tflops(dtype: torch.dtype = torch.bfloat16, size: int = 8192) -> float:
    """Median rate of a large matrix product on random data: the ceiling a kernel can reach here."""
    a = torch.randn(size, size, device="cuda", dtype=dtype)
    b = torch.randn(size, size, device="cuda", dtype=dtype)
    for _ in range(20):  # let the clocks ramp up
        a @ b
    rates = []
    for _ in range(50):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        torch.cuda.synchronize()
        rates.append(2 * size**3 / (start.elapsed_time(end) / 1e3) / 1e12)
    return statistics.median(rates)


def full_length_prompts(engine: Any, count: int, length: int) -> list[dict[str, list[int]]]:
    """``count`` token prompts of exactly ``length`` tokens ([CLS] window [SEP]), overlapping
    windows of the mixed corpus read as one text."""
    body = " ".join(mixed_corpus(max(1000, 2 * count)))  # ~75 tokens a text: enough for every window
    ids = engine.tokenizer(body, add_special_tokens=False)["input_ids"]
    cls, sep, width = engine.tokenizer.cls_token_id, engine.tokenizer.sep_token_id, length - 2
    prompts = [{"prompt_token_ids": [cls, *ids[i * 97 : i * 97 + width], sep]} for i in range(count)]
    assert all(len(p["prompt_token_ids"]) == length for p in prompts)
    return prompts


def mfu_rows(name: str, path: Path, seqs: int, passes: int, peaks: dict[str, float]) -> list[list[object]]:
    import transformers
    from sentence_transformers import SentenceTransformer

    from poolrag import Engine

    config = transformers.AutoConfig.from_pretrained(path)
    hidden, layers, limit = config.hidden_size, config.num_hidden_layers, 512
    engine = Engine(path, device="cuda")
    big = Engine(path, device="cuda", max_batch_tokens=65536)
    limit = min(limit, engine.max_model_len)
    prompts = full_length_prompts(engine, seqs, limit)
    # sentence-transformers gets the same tokens as text and truncates them to the same length
    texts = [engine.tokenizer.decode(p["prompt_token_ids"][1:-1]) + " tail" * 64 for p in prompts]
    st = SentenceTransformer(str(path), device="cuda").half()
    st.max_seq_length = limit
    flops = seqs * layers * (24 * limit * hidden**2 + 4 * limit**2 * hidden)
    contenders: dict[str, Callable[[], object]] = {
        f"poolrag {str(engine.dtype).removeprefix('torch.')}": lambda: engine.embed_array(prompts),
        "poolrag, 65,536-token batches": lambda: big.embed_array(prompts),
        "sentence-transformers fp16 b32": lambda: st.encode(texts, batch_size=32),
        "sentence-transformers fp16 b128": lambda: st.encode(texts, batch_size=128),
    }
    times = interleaved({k: _sync(v) for k, v in contenders.items()}, passes, warmup=1)
    rows = []
    for label, t in times.items():
        rate = flops / t / 1e12
        rows.append([name, label, f"{seqs}×{limit}", seqs * limit / t, rate,
                     rate / peaks["datasheet"], rate / peaks["measured"]])  # fmt: skip
    return rows


KERNEL_FAMILIES = (
    ("attention (flash)", ("flash", "fmha", "attention")),
    ("GEMM", ("gemm", "nvjet", "cutlass", "xmma", "matmul", "sm90")),
    ("LayerNorm", ("layer_norm", "layernorm")),
    ("GELU", ("gelu",)),
)


def profile_rows(name: str, path: Path, batch_tokens: int = 16384) -> list[list[object]]:
    """CUDA time by kernel family for one 512-token batch: where the rest of the time goes."""
    from torch.profiler import ProfilerActivity, profile

    from poolrag import Engine

    engine = Engine(path, device="cuda")
    prompts = full_length_prompts(engine, batch_tokens // 512, 512)
    engine.embed_array(prompts)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            engine.embed_array(prompts)
        torch.cuda.synchronize()
    totals: dict[str, float] = {}
    for event in prof.key_averages():
        us = getattr(event, "device_time_total", 0.0) or getattr(event, "cuda_time_total", 0.0)
        if not us or event.key.startswith(("aten::", "cuda", "Memcpy", "Memset")):
            continue
        lowered = event.key.lower()
        family = next(
            (f for f, keys in KERNEL_FAMILIES if any(k in lowered for k in keys)), "other elementwise"
        )
        totals[family] = totals.get(family, 0.0) + us
    whole = sum(totals.values())
    return [
        [name, family, us / 3 / 1e3, us / whole] for family, us in sorted(totals.items(), key=lambda x: -x[1])
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=4000, help="texts of the mixed corpus (default 4000)")
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--models", default="minilm,bert-base,bert-large")
    parser.add_argument("--mfu-seqs", type=int, default=256, help="512-token sequences for MFU")
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="datasheet dense bf16 TFLOP/s")
    parser.add_argument("--json", type=Path, help="also write the rows and the machine as JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if not torch.cuda.is_available():
        print("benchmarks/gpu.py needs a CUDA GPU", file=sys.stderr)
        return 2

    facts = machine_facts()
    print(f"machine: {machine(facts)}", flush=True)
    peaks = {"datasheet": args.peak_tflops, "measured": measured_peak_tflops()}
    print(f"peak bf16 TFLOP/s: datasheet {args.peak_tflops:.0f}, measured {peaks['measured']:.0f}")
    mixed, mfu, kernels = [], [], []
    with tempfile.TemporaryDirectory(prefix="poolrag-gpu-") as tmp:
        for name in args.models.split(","):
            path = minilm_path() if name == "minilm" else build_bert(Path(tmp) / name, name, minilm_path())
            start = time.perf_counter()
            mixed += mixed_rows(name, path, args.n, args.passes)
            print(table(MIXED_HEADERS, mixed), flush=True)
            if name != "minilm":  # MiniLM stops at 256 tokens
                mfu += mfu_rows(name, path, args.mfu_seqs, args.passes, peaks)
                print(table(MFU_HEADERS, mfu), flush=True)
                kernels += profile_rows(name, path)
                print(table(["model", "kernels", "ms per 16,384-token batch", "share"], kernels), flush=True)
            print(f"({name}: {time.perf_counter() - start:.0f} s)", flush=True)
    if args.json:
        payload = {"machine": facts, "machine_line": machine(facts), "peaks": peaks}
        args.json.write_text(
            json.dumps({**payload, "mixed": mixed, "mfu": mfu, "kernels": kernels}, indent=1, default=str)
        )
    return 0


MIXED_HEADERS = ["model", "engine", "texts", "tokens", "texts/s", "tokens/s", "× best ST", "min cos to fp32"]
MFU_HEADERS = ["model", "engine", "batch", "tokens/s", "TFLOP/s", "MFU (datasheet)", "MFU (measured peak)"]

if __name__ == "__main__":
    sys.exit(main())
