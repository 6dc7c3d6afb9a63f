"""vLLM's CPU build embedding the benchmark corpus; driven by vs_vllm.py inside vLLM's own venv.

    .venv-vllm/bin/python benchmarks/vllm_embed.py MODEL DTYPE N OUT_PREFIX

Loads the model, embeds once to warm up, writes OUT_PREFIX.npy (the embeddings) and prints one
JSON line with the cold-start time and token count; then, for every line "run" on stdin, embeds
the corpus again and prints the seconds it took, so the driver can interleave vLLM passes with
poolrag passes under the same machine load.
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    model, dtype, n, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    from corpus import mixed_corpus

    texts = mixed_corpus(n)
    start = time.perf_counter()
    import numpy as np
    from vllm import LLM

    # on CPU, gpu_memory_utilization is the share of host memory vLLM reserves; the machine is shared
    llm = LLM(
        model=model, runner="pooling", dtype=dtype, max_model_len=256, seed=0, gpu_memory_utilization=0.2
    )
    llm.embed(["cold start probe"], use_tqdm=False)
    cold = time.perf_counter() - start
    outputs = llm.embed(texts, use_tqdm=False)  # warm-up pass
    np.save(out + ".npy", np.asarray([o.outputs.embedding for o in outputs], dtype=np.float32))
    tokens = sum(len(o.prompt_token_ids) for o in outputs)
    print(json.dumps({"ready": True, "tokens": tokens, "load_and_first_vector_s": cold}), flush=True)
    for line in sys.stdin:
        if line.strip() != "run":
            break
        t0 = time.perf_counter()
        llm.embed(texts, use_tqdm=False)
        print(json.dumps({"seconds": time.perf_counter() - t0}), flush=True)


if __name__ == "__main__":
    main()
