"""poolrag vs what a CPU user of sentence-transformers would pick instead: its ONNX Runtime backend
(fp32, and dynamic int8 through ``export_dynamic_quantized_onnx_model``) and, where it installs,
its OpenVINO backend. Same texts, same model, passes interleaved.

    python benchmarks/vs_onnx.py [--n 1000] [--passes 3] [--onnx-python .venv-onnx/bin/python]
                                 [--backends onnx,onnx-int8,openvino]

The ONNX side runs in a venv of its own (``onnx_embed.py``): sentence-transformers' ``onnx`` extra
needs optimum-onnx, which needs transformers < 4.58 (so, today, sentence-transformers 5.x), while
poolrag runs on transformers 5. Make it with ``python -m venv .venv-onnx && .venv-onnx/bin/pip
install torch "sentence-transformers[onnx]<6"`` (add ``"optimum-intel[openvino]"`` for OpenVINO).
Each backend stays loaded in its child process and its passes alternate with poolrag's (median
of ``--passes`` after a warm-up each), so a change in machine load hits all alike.

poolrag's rows: ``Engine(model)`` exactly as a user gets it (its own autotuning included; the
verdict is printed) and the fast modes ``bf16`` / ``int8``, the one ``cpu_fast_mode="auto"``
picks on this machine marked (its measurement printed), and int8 compiled (timed once the
background compile is in). Both ratio columns are given for every
row (exact rows compare with ONNX fp32, fast rows with ONNX int8); every row's min / mean cosine
to sentence-transformers' torch fp32 vectors is beside it.
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


class OnnxProcess:
    """One sentence-transformers backend loaded in its own venv; ``run()`` embeds the corpus there."""

    def __init__(self, python: str, model: Path, backend: str, n: int, out: Path) -> None:
        prefix = str(out / f"st-{backend}")
        script = str(ROOT / "benchmarks" / "onnx_embed.py")
        self.proc = subprocess.Popen(
            [python, script, str(model), backend, str(n), prefix, str(out)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(out / f"st-{backend}.log", "w"),  # noqa: SIM115 (lives as long as the child)
            text=True,
            env=dict(os.environ, TOKENIZERS_PARALLELISM="false"),
        )
        self.info = self._read()
        self.vectors = np.load(prefix + ".npy")

    def _read(self) -> dict[str, object]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                return json.loads(line)
        raise RuntimeError("the ONNX side exited without answering (see st-BACKEND.log / run onnx_embed.py)")

    def run(self) -> float:
        assert self.proc.stdin is not None
        self.proc.stdin.write("run\n")
        self.proc.stdin.flush()
        return float(self._read()["seconds"])  # type: ignore[arg-type]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(60)


def cosines(vectors: np.ndarray, reference: np.ndarray) -> tuple[float, float]:
    a = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    b = reference / np.linalg.norm(reference, axis=1, keepdims=True)
    cos = (a * b).sum(axis=1)
    return float(cos.min()), float(cos.mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--onnx-python", default=str(ROOT / ".venv-onnx" / "bin" / "python"))
    parser.add_argument("--backends", default="onnx,onnx-int8,openvino")
    args = parser.parse_args()
    if not Path(args.onnx_python).is_file():  # checked before poolrag's side spends a minute
        parser.error(f"--onnx-python {args.onnx_python} not found: make the ONNX venv as the docstring says")
    print(machine(), flush=True)
    from sentence_transformers import SentenceTransformer

    from poolrag import Engine

    model = minilm_path()
    texts = mixed_corpus(args.n)
    reference = SentenceTransformer(str(model), device="cpu").encode(texts, batch_size=32)
    os.environ.pop("POOLRAG_TUNE", None)  # the default a user gets: tuned
    default = Engine(model)
    print(default.tune_report.table(), flush=True)
    auto = Engine(model, cpu_fast_mode="auto").tune_report
    picked = auto.verdict.fast_mode if auto.verdict else None
    print(f"cpu_fast_mode='auto' ({auto.state}):\n{auto.table()}", flush=True)
    poolrag = {"poolrag Engine(model) (tuned default)": default}
    for mode in ("bf16", "int8"):  # the auto pick is one of these (or exact fp32): not timed twice
        mark = " (= cpu_fast_mode='auto')" if mode == picked else ""
        poolrag[f"poolrag cpu_fast_mode={mode}{mark}"] = Engine(model, cpu_fast_mode=mode)
    compiled = Engine(model, cpu_fast_mode="int8", compile="background")
    print(f"int8 compiled: {compiled.wait_for_compile()}", flush=True)
    poolrag["poolrag cpu_fast_mode=int8, compile='background'"] = compiled
    runs = {label: (lambda e=engine: e.embed_array(texts)) for label, engine in poolrag.items()}
    others: dict[str, OnnxProcess] = {}
    labels = {
        "onnx": "ST ONNX Runtime fp32",
        "onnx-int8": "ST ONNX Runtime int8",
        "openvino": "ST OpenVINO fp32",
    }
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for backend in args.backends.split(","):
                try:
                    others[labels[backend]] = OnnxProcess(args.onnx_python, model, backend, args.n, Path(tmp))
                except RuntimeError as exc:
                    log = (Path(tmp) / f"st-{backend}.log").read_text().strip().splitlines()
                    print(f"{labels[backend]}: not run ({exc}; last log line: {log[-1] if log else ''})")
            for label, process in others.items():
                runs[label] = process.run
                print(f"{label}: {process.info}", flush=True)
            times = interleaved(runs, args.passes)
        finally:
            for process in others.values():
                process.close()
        vectors = {label: engine.embed_array(texts) for label, engine in poolrag.items()}
        vectors |= {label: process.vectors for label, process in others.items()}
    fp32 = times.get("ST ONNX Runtime fp32")
    int8 = times.get("ST ONNX Runtime int8")
    rows = []
    for label, seconds in times.items():
        low, mean = cosines(vectors[label], reference)
        rows.append([
            label, args.n / seconds,
            fp32 / seconds if fp32 else "-", int8 / seconds if int8 else "-",
            f"{low:.6f}", f"{mean:.6f}",
        ])  # fmt: skip
    headers = ["engine", "texts/s", "× ONNX fp32", "× ONNX int8", "min cos vs ST fp32", "mean cos"]
    print(table(headers, rows))


if __name__ == "__main__":
    main()
