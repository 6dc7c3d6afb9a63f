"""vLLM's CPU build embedding the benchmark corpus; run by vs_vllm.py inside vLLM's own venv.

    .venv-vllm/bin/python benchmarks/vllm_embed.py MODEL DTYPE N PASSES OUT_PREFIX

Writes OUT_PREFIX.json (texts/s, tokens, timings) and OUT_PREFIX.npy (the embeddings).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    model, dtype, n, passes, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    from corpus import mixed_corpus

    texts = mixed_corpus(n)
    start = time.perf_counter()
    import numpy as np
    from vllm import LLM

    # on CPU, gpu_memory_utilization is the share of host memory vLLM reserves; the machine is shared
    llm = LLM(
        model=model, runner="pooling", dtype=dtype, max_model_len=256, seed=0, gpu_memory_utilization=0.2
    )
    first = llm.embed(["cold start probe"], use_tqdm=False)
    cold = time.perf_counter() - start
    outputs = llm.embed(texts, use_tqdm=False)  # warm-up pass
    times = []
    for _ in range(passes):
        t0 = time.perf_counter()
        outputs = llm.embed(texts, use_tqdm=False)
        times.append(time.perf_counter() - t0)
    tokens = sum(len(o.prompt_token_ids) for o in outputs)
    vectors = np.asarray([o.outputs.embedding for o in outputs], dtype=np.float32)
    np.save(out + ".npy", vectors)
    median = statistics.median(times)
    result = {
        "dtype": dtype,
        "texts": n,
        "tokens": tokens,
        "times": times,
        "texts_per_s": n / median,
        "tokens_per_s": tokens / median,
        "load_and_first_vector_s": cold,
        "first_dim": len(first[0].outputs.embedding),
    }
    with open(out + ".json", "w") as handle:
        json.dump(result, handle)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
