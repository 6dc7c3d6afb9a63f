"""vLLM engine options with no counterpart here, shared by ``LLM(...)`` and ``poolrag serve``.

vLLM tunes a KV cache, a scheduler and a GPU memory pool that a pooling engine does not have;
no result depends on them. Refusing them would stop ``vllm serve`` lines and ``LLM(...)`` calls
from carrying over, and dropping them in silence would let a user believe they did something,
so they are accepted with one warning naming them. The options poolrag maps to its own
(``max_num_seqs``, ``enforce_eager``, ``max_num_batched_tokens``, ...) are not listed here.
Beside them, the one per-call rule of vLLM's that poolrag's own API does not keep
(:func:`refuse_longer_cut`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from poolrag.errors import InvalidInputError

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
    "kv_cache_memory_bytes": False,
    "max_logprobs": False,
    "attention_config": False,
    "async_scheduling": True,  # overlaps scheduling with decoding steps
    "kv_transfer_config": False,  # disaggregated prefill's KV cache transfer
    "enable_sleep_mode": True,  # offloads weights and KV cache between RL steps
}


def warn_no_effect(names: Iterable[str], log: logging.Logger) -> None:
    """One warning for all the given options that change nothing here (none: no warning)."""
    given = sorted(set(names))
    if given:
        log.warning(
            "accepted but no effect in poolrag (vLLM KV-cache / scheduler / GPU-memory options): %s",
            ", ".join(given),
        )


def refuse_longer_cut(truncate_prompt_tokens: int | None, max_model_len: int) -> None:
    """Refuse, as vLLM's ``LLM`` and routes do, a ``truncate_prompt_tokens`` over the model's length
    (poolrag's own API cuts such a request at the model's length instead). vLLM's words, which its
    clients and tests match on."""
    if truncate_prompt_tokens is not None and truncate_prompt_tokens > max_model_len:
        raise InvalidInputError(
            f"truncate_prompt_tokens value ({truncate_prompt_tokens}) is greater than max_model_len "
            f"({max_model_len}). Please, select a smaller truncation size.",
            param="truncate_prompt_tokens",
        )


def refuse_parallelism(
    tensor_parallel_size: int, pipeline_parallel_size: int = 1, data_parallel_size: int = 1
) -> None:
    """vLLM's tensor / pipeline / data parallelism has no counterpart: a model larger than one
    device is spread by accelerate's placement instead, and replicas are Ray's (``--ray``), so any
    size but 1 is refused, naming those ways."""
    if tensor_parallel_size != 1 or pipeline_parallel_size != 1:
        raise InvalidInputError(
            "tensor / pipeline parallelism is not supported; a model larger than one device is "
            "spread over several by device_map='auto' (Engine / LLM)"
        )
    if data_parallel_size != 1:
        raise InvalidInputError(
            "data parallelism is not supported in one process; replicas run on Ray "
            "(poolrag serve --ray, poolrag ingest --ray)"
        )


def eager_compile(
    enforce_eager: bool,
    compile: str | None,
    spelling: tuple[str, str] = ("enforce_eager", "compile='background'"),
) -> str | None:
    """vLLM's ``enforce_eager`` as poolrag's ``compile``: ``"off"``, so not even a tune verdict that
    chose a compiled path compiles; next to ``compile="background"`` it is a contradiction, named as
    the caller spells the two (keywords, or the command's flags)."""
    if not enforce_eager:
        return compile
    if compile not in (None, "off"):
        raise InvalidInputError(f"{spelling[0]} contradicts {spelling[1]}; give one of them")
    return "off"
