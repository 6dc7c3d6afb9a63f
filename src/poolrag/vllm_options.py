"""vLLM engine options with no counterpart here, shared by ``LLM(...)`` and ``poolrag serve``.

vLLM tunes a KV cache, a scheduler and a GPU memory pool that a pooling engine does not have;
no result depends on them. Refusing them would stop ``vllm serve`` lines and ``LLM(...)`` calls
from carrying over, and dropping them in silence would let a user believe they did something,
so they are accepted with one warning naming them. The options poolrag maps to its own
(``max_num_seqs``, ``enforce_eager``, ``max_num_batched_tokens``, ...) are not listed here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

#: vLLM option (``LLM`` keyword spelling) -> whether the ``serve`` flag is a switch (no value).
NO_EFFECT_OPTIONS: dict[str, bool] = {
    "gpu_memory_utilization": False,
    "swap_space": False,
    "cpu_offload_gb": False,
    "kv_cache_dtype": False,
    "block_size": False,
    "enable_prefix_caching": True,
    "enable_chunked_prefill": True,
    "max_seq_len_to_capture": False,
    "disable_custom_all_reduce": True,
    "disable_log_stats": True,
    "compilation_config": False,
    "load_format": False,
    "distributed_executor_backend": False,
    "seed": False,
    "max_log_len": False,
}


def warn_no_effect(names: Iterable[str], log: logging.Logger) -> None:
    """One warning for all the given options that change nothing here (none: no warning)."""
    given = sorted(set(names))
    if given:
        log.warning(
            "accepted but no effect in poolrag (vLLM KV-cache / scheduler / GPU-memory options): %s",
            ", ".join(given),
        )
