"""``poolrag serve MODEL``: run the OpenAI-compatible pooling server."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any

from poolrag.cli.extras import EXIT_MISSING_EXTRA, require_extra
from poolrag.server.settings import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_INPUTS,
    DEFAULT_MAX_QUEUE,
    default_served_name,
)
from poolrag.vllm_options import NO_EFFECT_OPTIONS, warn_no_effect

logger = logging.getLogger(__name__)

API_KEY_ENV = "POOLRAG_API_KEY"


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from exc
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="serve a model over HTTP (OpenAI-compatible embeddings, score, rerank, classify, pooling)",
        description="Serve a pooling model over HTTP with OpenAI / vLLM / Jina / Cohere-shaped endpoints.",
    )
    parser.add_argument("model", metavar="MODEL", nargs="?", help="hub id or local model folder")
    net = parser.add_argument_group("server")
    net.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    net.add_argument("--port", type=int, default=8000)
    _add(
        net,
        "--api-key",
        default=os.environ.get(API_KEY_ENV),
        help=f"require 'Authorization: Bearer KEY' (default: ${API_KEY_ENV}, if set)",
    )
    _add(
        net,
        "--served-model-name",
        nargs="+",
        metavar="NAME",
        help="name(s) clients pass as 'model'; the first is reported (default: MODEL, or a local "
        "folder's last path component)",
    )
    _add(
        net,
        "--max-queue",
        type=_positive_int,
        default=DEFAULT_MAX_QUEUE,
        help="most requests admitted at once; more get 503 + Retry-After",
    )
    _add(net, "--max-inputs", type=_positive_int, default=DEFAULT_MAX_INPUTS, help="most inputs per request")
    _add(
        net,
        "--max-body-bytes",
        type=_positive_int,
        default=DEFAULT_MAX_BODY_BYTES,
        help="largest request body (413)",
    )
    _add(
        net,
        "--allowed-hosts",
        nargs="+",
        metavar="HOST",
        help="Host header names to answer ('*': any; default: the loopback names when keyless on loopback)",
    )
    _add(net, "--max-request-tokens", type=_positive_int, help="most token ids per request (413)")
    _add(net, "--max-request-chars", type=_positive_int, help="most characters of text per request (413)")
    _add(
        net, "--max-inflight-bytes", type=_positive_int, help="request body bytes held at once; more get 503"
    )
    _add(net, "--max-inflight-tokens", type=_positive_int, help="tokens in flight at once; more get 503")
    _add(net, "--header-timeout", type=float, default=10.0, help="seconds to send request headers")
    _add(net, "--body-timeout", type=float, default=30.0, help="seconds to send a request body (408)")
    _add(net, "--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    scale = parser.add_argument_group("scaling out (the ray extra)")
    scale.add_argument(
        "--ray",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="serve replicas on Ray Serve: join the cluster at ADDRESS (e.g. auto, ray://head:10001), "
        "or start one on this machine when no ADDRESS is given",
    )
    scale.add_argument(
        "--replicas",
        type=_replica_count,
        default="auto",
        metavar="N|auto",
        help="with --ray: N replicas, or auto: 1 up to one per GPU (or per CPU), scaled on requests "
        "in flight (default auto)",
    )

    eng = parser.add_argument_group("engine")
    eng.add_argument("--model", dest="model_option", metavar="MODEL", help="the model, as vLLM's flag")
    eng.add_argument(
        "--runner",
        type=_runner,
        default="auto",
        help="vLLM's runner: auto or pooling (poolrag serves pooling models only)",
    )
    eng.add_argument(
        "--convert",
        choices=("auto", "none", "embed", "classify", "reward"),
        default="auto",
        help="vLLM's model conversion: pool the backbone (embed), score from lm_head rows (classify), "
        "or a process reward model (reward)",
    )
    _add(
        eng,
        "--score-template",
        metavar="NAME|FILE",
        help="prompt for (query, document) pairs of LLM rerankers: a shipped name "
        "(qwen3_reranker, bge_reranker_v2_gemma, mxbai_rerank_v2) or a .jinja file",
    )
    _add(
        eng,
        "--chat-template",
        metavar="FILE",
        help="vLLM's spelling of --score-template: a vLLM score template file as it ships (reads messages)",
    )
    eng.add_argument(
        "--quantization", choices=("int8", "fp8"), help="weight-only quantization (torchao); fp8 needs CUDA"
    )
    eng.add_argument("--task", help="primary pooling task (default: the model's own)")
    eng.add_argument("--dtype", default="auto", help="auto, float32, float16, bfloat16")
    eng.add_argument("--device", help="cuda, cpu, ... (default: auto)")
    _add(eng, "--max-model-len", type=_positive_int, help="token limit per input")
    _add(
        eng,
        "--max-batch-tokens",
        "--max-num-batched-tokens",
        type=_positive_int,
        default=None,
        help="tokens per forward pass (default: 16384 on CUDA, 4096 on CPU)",
    )
    _add(eng, "--max-num-seqs", type=_positive_int, help="most sequences per forward pass (default 512)")
    eng.add_argument("--tokenizer", help="tokenizer folder or hub id (default: the model's)")
    eng.add_argument("--revision", help="hub revision of the model")
    _add(eng, "--trust-remote-code", action="store_true", help="allow model folders with their own code")
    _add(eng, "--pooler-config", type=_json_object, metavar="JSON", help="pooling overrides (vLLM's keys)")
    _add(eng, "--hf-overrides", type=_json_object, metavar="JSON", help="transformers config overrides")
    _add(
        eng,
        "--cpu-fast-mode",
        choices=("bf16", "int8"),
        help="faster, inexact CPU inference; kept only if its measured cosine to fp32 clears the bar",
    )
    _add(
        eng,
        "--model-impl",
        choices=("auto", "native", "transformers"),
        default="auto",
        help="poolrag's own encoder implementation where exact (auto), required (native), or never",
    )
    eng.add_argument(
        "--compile",
        choices=("off", "background"),
        default="off",
        help="background: serve eagerly at once, compile the forward (inductor, cached on disk for "
        "the next start) and switch to it once it matches eager (default: off)",
    )
    _add(eng, "--enforce-eager", action="store_true", help="never compile (poolrag's default: --compile off)")
    _add(eng, "--tensor-parallel-size", "-tp", type=_positive_int, default=1, help="must be 1")
    _add(eng, "--pipeline-parallel-size", "-pp", type=_positive_int, default=1, help="must be 1")
    _add(net, "--disable-log-requests", action="store_true", help="no access log line per request")
    vllm = parser.add_argument_group("vLLM options with no effect here (accepted with one warning)")
    for name, is_switch in NO_EFFECT_OPTIONS.items():
        flag = "--" + name.replace("_", "-")
        if is_switch:
            _add(vllm, flag, dest=name, action=argparse.BooleanOptionalAction, default=None)
        else:
            _add(vllm, flag, dest=name, metavar="VALUE")
    parser.set_defaults(handler=run)


def _add(group: Any, flag: str, *aliases: str, **kwargs: Any) -> None:
    """``--a-b`` plus vLLM's other spelling ``--a_b`` (vLLM takes both) of every long name."""
    names = [flag, *aliases]
    names += [
        n.replace("-", "_").replace("__", "--", 1) for n in names if n.startswith("--") and "-" in n[2:]
    ]
    group.add_argument(*names, **kwargs)


def _replica_count(text: str) -> int | str:
    return "auto" if text == "auto" else _positive_int(text)


def _runner(text: str) -> str:
    if text == "generate":
        raise argparse.ArgumentTypeError("poolrag serves pooling models only; use vLLM to generate text")
    if text not in ("auto", "pooling"):
        raise argparse.ArgumentTypeError(f"must be auto or pooling, not {text!r}")
    return text


def engine_options_of(args: argparse.Namespace) -> dict[str, Any]:
    """The Engine's options from the command line, vLLM's flags mapped to poolrag's or warned about."""
    if args.tensor_parallel_size != 1 or args.pipeline_parallel_size != 1:
        raise ValueError(
            "tensor / pipeline parallelism is not supported; a model larger than one device is "
            "spread over several by device_map='auto' (Engine / LLM)"
        )
    if args.enforce_eager and args.compile != "off":
        raise ValueError("--enforce-eager contradicts --compile background; give one of them")
    if args.chat_template and args.score_template and args.chat_template != args.score_template:
        raise ValueError("give --chat-template or --score-template, not both")
    warn_no_effect((name for name in NO_EFFECT_OPTIONS if getattr(args, name) is not None), logger)
    return dict(
        task=args.task,
        dtype=args.dtype,
        device=args.device,
        max_model_len=args.max_model_len,
        pooler_config=args.pooler_config,
        hf_overrides=args.hf_overrides,
        trust_remote_code=args.trust_remote_code,
        max_batch_tokens=args.max_batch_tokens,
        max_batch_size=args.max_num_seqs,
        tokenizer=args.tokenizer,
        revision=args.revision,
        cpu_fast_mode=args.cpu_fast_mode,
        model_impl=args.model_impl,
        compile=args.compile,
        convert=None if args.convert in ("auto", "none") else args.convert,
        score_template=args.chat_template or args.score_template,
        quantization=args.quantization,
    )


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if args.model and args.model_option and args.model != args.model_option:
        print(f"poolrag serve: two models: {args.model} and --model {args.model_option}", file=sys.stderr)
        return 2
    args.model = args.model or args.model_option
    if not args.model:
        print("poolrag serve: give the model as MODEL or --model MODEL", file=sys.stderr)
        return 2
    if not require_extra("serve", "server"):
        return EXIT_MISSING_EXTRA
    from poolrag import Engine, PoolragError
    from poolrag.server import ServerSettings
    from poolrag.server.run import check_port_free, serve

    if args.ray is None:
        try:
            check_port_free(args.host, args.port)
        except OSError as exc:
            print(f"poolrag serve: {exc.strerror}", file=sys.stderr)
            return 2
    try:
        settings = ServerSettings(
            served_model_names=tuple(args.served_model_name or [default_served_name(args.model)]),
            api_key=args.api_key or None,
            max_queue=args.max_queue,
            max_inputs=args.max_inputs,
            max_body_bytes=args.max_body_bytes,
            allowed_hosts=tuple(args.allowed_hosts) if args.allowed_hosts else None,
            max_request_tokens=args.max_request_tokens,
            max_request_chars=args.max_request_chars,
            max_inflight_bytes=args.max_inflight_bytes,
            max_inflight_tokens=args.max_inflight_tokens,
            header_timeout_s=args.header_timeout,
            body_timeout_s=args.body_timeout,
        )
        engine_options = engine_options_of(args)
        if args.ray is not None:
            if args.disable_log_requests:
                logger.warning("--disable-log-requests has no effect with --ray: Ray Serve keeps its own log")
            return _serve_on_ray(args, settings, engine_options)
        engine = Engine(args.model, **engine_options)
    except (PoolragError, ValueError, OSError) as exc:  # a bad model path or file, a bad option
        print(f"poolrag serve: cannot start: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    if args.host not in ("127.0.0.1", "localhost", "::1") and settings.api_key is None:
        logger.warning("listening on %s without an API key: anyone who can reach it can use it", args.host)
    serve(
        engine,
        settings,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        access_log=not args.disable_log_requests,
    )
    return 0


def _serve_on_ray(args: argparse.Namespace, settings: Any, engine_options: dict[str, Any]) -> int:
    """The same app as replicas on Ray Serve; blocks until interrupted."""
    if not require_extra("serve --ray", "ray"):
        return EXIT_MISSING_EXTRA
    from poolrag.scaleout.cluster import connect
    from poolrag.scaleout.ray_serve import ReplicaPlan, serve_on_ray

    plan = ReplicaPlan(replicas=None if args.replicas == "auto" else args.replicas)
    connect(args.ray)
    serve_on_ray(args.model, engine_options, settings, plan, host=args.host, port=args.port)
    return 0
