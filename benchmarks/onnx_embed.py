"""sentence-transformers' ONNX Runtime / OpenVINO backends embedding the benchmark corpus; driven by
vs_onnx.py inside a venv of their own (optimum-onnx needs transformers < 4.58, poolrag's venv has 5.x).

    .venv-onnx/bin/python benchmarks/onnx_embed.py MODEL BACKEND N OUT_PREFIX WORKDIR

BACKEND is ``onnx`` (fp32 graph exported by sentence-transformers), ``onnx-int8`` (that graph
through ``export_dynamic_quantized_onnx_model``, the int8 recipe sentence-transformers documents,
with the config matching this CPU) or ``openvino``. The model folder is copied into WORKDIR
first, so exports never touch the original. Protocol as vllm_embed.py: one JSON line when ready
(load time, the vectors written to OUT_PREFIX.npy), then one JSON line of seconds per "run".
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _quantization_config() -> str:
    flags = Path("/proc/cpuinfo").read_text()
    if "avx512_vnni" in flags:
        return "avx512_vnni"
    return "avx512" if "avx512f" in flags else "avx2"


def load(model: str, backend: str, workdir: Path):
    from sentence_transformers import SentenceTransformer

    folder = workdir / f"model-{backend}"
    if not folder.exists():
        shutil.copytree(model, folder)
    if backend == "openvino":
        return SentenceTransformer(str(folder), backend="openvino", device="cpu"), "fp32"
    st = SentenceTransformer(str(folder), backend="onnx", device="cpu")
    if backend == "onnx":
        return st, "fp32"
    from sentence_transformers import export_dynamic_quantized_onnx_model

    config = _quantization_config()
    st.save_pretrained(str(folder))  # the exported fp32 graph, which the quantiser reads
    export_dynamic_quantized_onnx_model(st, config, str(folder))
    name = f"onnx/model_qint8_{config}.onnx"
    return SentenceTransformer(
        str(folder), backend="onnx", device="cpu", model_kwargs={"file_name": name}
    ), config


def main() -> None:
    model, backend, n, out, workdir = (
        sys.argv[1],
        sys.argv[2],
        int(sys.argv[3]),
        sys.argv[4],
        Path(sys.argv[5]),
    )
    import numpy as np
    from corpus import mixed_corpus

    texts = mixed_corpus(n)
    start = time.perf_counter()
    st, variant = load(model, backend, workdir)
    st.encode(["cold start probe"])
    cold = time.perf_counter() - start
    vectors = st.encode(texts, batch_size=32)  # warm-up pass
    np.save(out + ".npy", np.asarray(vectors, dtype=np.float32))
    print(json.dumps({"ready": True, "variant": variant, "load_and_first_vector_s": cold}), flush=True)
    for line in sys.stdin:
        if line.strip() != "run":
            break
        t0 = time.perf_counter()
        st.encode(texts, batch_size=32)
        print(json.dumps({"seconds": time.perf_counter() - t0}), flush=True)


if __name__ == "__main__":
    main()
