"""``poolrag serve MODEL``: run the OpenAI-compatible pooling server."""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from poolrag.cli.command_errors import log_at
from poolrag.cli.extras import EXIT_MISSING_EXTRA, require_extra
from poolrag.cli.interrupts import EXIT_TERMINATED, Terminated, sigterm_interrupts
from poolrag.cli.vllm_frontend import add_frontend_flags, http_options, warn_frontend_no_effect
from poolrag.engine_args import EngineArgs, add_flag, positive_float, positive_int
from poolrag.native_heap import SERVER_TRIM_INTERVAL_S, trim_after_batches
from poolrag.server.settings import (
    DEFAULT_MAX_ANSWER_VALUES,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_INPUTS,
    DEFAULT_MAX_QUEUE,
)
from poolrag.vllm_options import NO_EFFECT_OPTIONS, eager_compile, refuse_parallelism, warn_no_effect

logger = logging.getLogger(__name__)

API_KEY_ENV = "POOLRAG_API_KEY"
#: vLLM's variable for the key, read when poolrag's is unset: a deployment that hands ``vllm serve``
#: its key this way (a Kubernetes secret) keeps its key instead of serving every caller.
VLLM_API_KEY_ENV = "VLLM_API_KEY"


def key_from_environment() -> tuple[str, str] | None:
    """The API key the environment gives and the variable that gave it: ``$POOLRAG_API_KEY``, else
    vLLM's ``$VLLM_API_KEY``; None when neither is set."""
    for name in (API_KEY_ENV, VLLM_API_KEY_ENV):
        if name in os.environ:
            return os.environ[name], name
    return None


def port_number(text: str) -> int:
    """An argparse type: a TCP port, 0 (the system picks a free one) to 65535."""
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from exc
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, not {value}")
    return value


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="serve a model over HTTP (OpenAI-compatible embeddings, score, rerank, classify, pooling)",
        description="Serve a pooling model over HTTP with OpenAI / vLLM / Jina / Cohere-shaped endpoints.",
    )
    parser.add_argument("model", metavar="MODEL", nargs="?", help="hub id or local model folder")
    parser.add_argument(
        "more_models",
        metavar="MODEL",
        nargs="*",
        help="more models served by the same process, each request picking one by its 'model' field "
        "(none: the first); engine flags apply to every model",
    )
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="YAML file of these options by their long names, as vLLM's --config (port: 8000, "
        "served-model-name: [a, b]); the command line wins over it",
    )
    parser.add_argument(
        "--models-file",
        type=Path,
        metavar="FILE",
        help="TOML file of [[model]] tables: model, served_model_name, per-model limits (max_queue, "
        "max_inputs, max_request_tokens, max_request_chars, max_inflight_tokens, max_answer_values) "
        "and engine options",
    )
    net = parser.add_argument_group("server")
    net.add_argument(
        "--host", "--hostname", default="127.0.0.1", help="address to bind (default: loopback only)"
    )
    net.add_argument(  # -p as TEI's: argparse otherwise read it as an abbreviation of -pp
        "--port", "-p", type=port_number, default=8000, help="TCP port (default 8000; 0: any free)"
    )
    net.add_argument(
        "--uds",
        type=Path,
        metavar="PATH",
        help="serve on this Unix domain socket instead of --host/--port (vLLM's and uvicorn's --uds): "
        "for a proxy on the same machine; a stale socket file there is replaced",
    )
    add_flag(
        net,
        "--api-key",
        help=f"require 'Authorization: Bearer KEY' (default: ${API_KEY_ENV}, else vLLM's "
        f"${VLLM_API_KEY_ENV}, if set)",
    )
    add_flag(
        net,
        "--served-model-name",
        nargs="+",
        metavar="NAME",
        help="name(s) clients pass as 'model'; the first is reported (default: MODEL, or a local "
        "folder's last path component); with several MODELs, one name per model",
    )
    add_flag(
        net,
        "--max-queue",
        "--max-concurrent-requests",
        type=positive_int,
        default=DEFAULT_MAX_QUEUE,
        help="most requests admitted at once; more get 503 + Retry-After (default %(default)s)",
    )
    add_flag(
        net,
        "--max-inputs",
        "--max-client-batch-size",
        type=positive_int,
        default=DEFAULT_MAX_INPUTS,
        help="most inputs per request (default %(default)s)",
    )
    add_flag(
        net,
        "--max-body-bytes",
        "--payload-limit",
        type=positive_int,
        default=DEFAULT_MAX_BODY_BYTES,
        help="largest request body in bytes (413; default %(default)s, 16 MiB)",
    )
    add_flag(
        net,
        "--allowed-hosts",
        nargs="+",
        metavar="HOST",
        help="Host header names to answer ('*': any; default: the loopback names when keyless on loopback)",
    )
    add_flag(
        net,
        "--allowed-origins",
        type=_json_names,
        metavar="JSON",
        help="web origins whose pages may call the server (CORS), a JSON list: '[\"https://app.example\"]', "
        "'[\"*\"]' for any (default: none, no CORS headers; vLLM's is any)",
    )
    add_flag(
        net,
        "--allowed-methods",
        type=_json_names,
        metavar="JSON",
        help="with --allowed-origins: methods a CORS preflight may ask for, a JSON list (default: any)",
    )
    add_flag(
        net,
        "--allowed-headers",
        type=_json_names,
        metavar="JSON",
        help="with --allowed-origins: headers a CORS preflight may ask for, a JSON list (default: any)",
    )
    add_flag(
        net,
        "--allow-credentials",
        action="store_true",
        help="with --allowed-origins: let pages send cookies and HTTP authentication (CORS)",
    )
    add_flag(
        net,
        "--max-request-tokens",
        type=positive_int,
        help="most token ids per request (413; default: max inputs x model length)",
    )
    add_flag(
        net,
        "--max-request-chars",
        type=positive_int,
        help="most characters of text per request (413; default: larger of --max-body-bytes and 8 x the "
        "token limit)",
    )
    add_flag(
        net,
        "--max-inflight-bytes",
        type=positive_int,
        help="request body bytes held at once; more get 503 (default: 4 x max body bytes)",
    )
    add_flag(
        net,
        "--max-inflight-tokens",
        type=positive_int,
        help="tokens in flight at once; more get 503 (default: 4 x the token limit)",
    )
    add_flag(
        net,
        "--max-answer-values",
        type=positive_int,
        default=DEFAULT_MAX_ANSWER_VALUES,
        help="most values in a per-token or sparse answer (token_embed, token_classify, /embed_all: "
        "tokens x width; sparse: non-zero weights; 413; default %(default)s, ~700 MB of JSON)",
    )
    add_flag(
        net,
        "--header-timeout",
        type=positive_float,
        default=10.0,
        help="seconds to send request headers (default %(default)s)",
    )
    add_flag(
        net,
        "--body-timeout",
        type=positive_float,
        default=30.0,
        help="seconds to send a request body (408; default %(default)s)",
    )
    add_flag(
        net,
        "--timeout-keep-alive",
        type=positive_float,
        default=5.0,
        metavar="SECONDS",
        help="close an idle keep-alive connection after this long; put it above a load balancer's "
        "idle timeout (uvicorn's flag; default %(default)s)",
    )
    add_flag(
        net,
        "--timeout-graceful-shutdown",
        type=positive_float,
        default=30.0,
        metavar="SECONDS",
        help="after SIGTERM or Ctrl-C, how long requests in flight may finish; those still running "
        "then get 503 'shutting down' (uvicorn's flag; default %(default)s)",
    )
    add_flag(
        net,
        "--retry-after",
        type=positive_int,
        default=1,
        metavar="SECONDS",
        help="the Retry-After of a 503 or 429 for a full queue or budget (default %(default)s)",
    )
    add_flag(
        net,
        "--idle-trim",
        type=positive_float,
        default=10.0,
        metavar="SECONDS",
        help="after this long without a request, give back the memory the last ones left "
        "(default %(default)s)",
    )
    add_flag(
        net,
        "--calibration",
        metavar="FILE",
        help="quantization ranges (from 'poolrag calibrate') that scale int8/uint8 vectors on /v2/embed "
        "when a request sends no calibration set (default: the model folder's quantization_ranges.json)",
    )
    add_flag(
        net,
        "--workers",
        type=positive_int,
        default=1,
        metavar="N",
        help="N server processes on the port, each with its own copy of the model(s) and cores/N torch "
        "threads: more requests/s where one process's event loop is the limit (small models, many "
        "clients), N times the memory (default 1)",
    )
    add_flag(
        net,
        "--log-level",
        default="info",
        choices=["critical", "error", "warning", "info", "debug"],
        help="poolrag's log level, and uvicorn's unless --uvicorn-log-level says (default %(default)s)",
    )
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

    eng = EngineArgs.add_engine_flags(parser)
    parser.set_defaults(compile="off")  # a server starts eagerly unless told otherwise
    eng.add_argument(
        "--model",
        "--model-id",
        dest="model_option",
        metavar="MODEL",
        help="the model, as vLLM's flag (TEI's: --model-id)",
    )
    eng.add_argument(
        "--runner",
        type=_runner,
        default="auto",
        help="vLLM's runner: auto or pooling (poolrag serves pooling models only)",
    )
    add_flag(
        eng,
        "--chat-template",
        metavar="FILE",
        help="vLLM's spelling of --score-template: a vLLM score template file as it ships (reads messages)",
    )
    add_flag(
        eng, "--enforce-eager", action="store_true", help="never compile (poolrag's default: --compile off)"
    )
    add_flag(eng, "--tensor-parallel-size", "-tp", type=positive_int, default=1, help="must be 1")
    add_flag(eng, "--pipeline-parallel-size", "-pp", type=positive_int, default=1, help="must be 1")
    add_flag(
        eng, "--data-parallel-size", "-dp", type=positive_int, default=1, help="must be 1 (replicas: --ray)"
    )
    add_flag(
        net,
        "--disable-log-requests",
        action="store_true",
        help="vLLM's (deprecated): no log of request contents, which poolrag never writes; the access "
        "log stays (--disable-uvicorn-access-log turns it off)",
    )
    add_frontend_flags(parser)
    vllm = parser.add_argument_group("vLLM options with no effect here (accepted with one warning)")
    for name, is_switch in NO_EFFECT_OPTIONS.items():
        flag = "--" + name.replace("_", "-")
        if is_switch:
            add_flag(vllm, flag, dest=name, action=argparse.BooleanOptionalAction, default=None)
        else:
            add_flag(vllm, flag, dest=name, metavar="VALUE")
    parser.set_defaults(handler=run)


def _replica_count(text: str) -> int | str:
    return "auto" if text == "auto" else positive_int(text)


def _json_names(text: str) -> tuple[str, ...]:
    """vLLM's form of the CORS flags: a JSON list of strings."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from exc
    if not isinstance(value, list) or not all(isinstance(name, str) and name for name in value):
        raise argparse.ArgumentTypeError(f"must be a JSON list of non-empty strings, not {text}")
    return tuple(value)


def _runner(text: str) -> str:
    if text == "generate":
        raise argparse.ArgumentTypeError("poolrag serves pooling models only; use vLLM to generate text")
    if text not in ("auto", "pooling"):
        raise argparse.ArgumentTypeError(f"must be auto or pooling, not {text!r}")
    return text


def engine_args_of(args: argparse.Namespace, model: str | None = None) -> EngineArgs:
    """The Engine's options from the command line, vLLM's flags mapped to poolrag's or warned about
    (for ``model``, default: the namespace's)."""
    refuse_parallelism(args.tensor_parallel_size, args.pipeline_parallel_size, args.data_parallel_size)
    flags = ("--enforce-eager", "--compile background")
    compile_mode = eager_compile(args.enforce_eager, args.compile, flags)
    if args.chat_template and args.score_template and args.chat_template != args.score_template:
        raise ValueError("give --chat-template or --score-template, not both")
    warn_no_effect((name for name in NO_EFFECT_OPTIONS if getattr(args, name) is not None), logger)
    return EngineArgs.from_cli_args(args, model).replace(
        score_template=args.chat_template or args.score_template, compile=compile_mode
    )


def _refused(message: str) -> int:
    """The command's one line on stderr and exit 2: nothing was served (a bad option, a busy port)."""
    print(f"poolrag serve: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    log_at(args.log_level)
    trim_after_batches(SERVER_TRIM_INTERVAL_S)  # main() set the interval of a batch job
    if args.model and args.model_option and args.model != args.model_option:
        return _refused(f"two models: {args.model} and --model {args.model_option}")
    if not (args.model or args.model_option) and args.models_file is None:
        return _refused("give the model as MODEL, --model MODEL or --models-file FILE")
    if not require_extra("serve", "server"):
        return EXIT_MISSING_EXTRA
    from poolrag import PoolragError
    from poolrag.server.run import check_port_free, serve
    from poolrag.server.unix_socket import check_unix_socket_free

    # With --ray, Ray Serve's proxy binds the port on the node this command runs on (a traceback
    # when it is taken); a cluster this command joins is checked once joined (its running Serve
    # may hold the port already).
    if args.uds is not None and args.ray is not None:
        return _refused("--uds serves from this machine; with --ray, Ray Serve's proxy serves HTTP")
    if args.ray in (None, "local"):
        try:
            if args.uds is None:
                check_port_free(args.host, args.port)
            else:
                check_unix_socket_free(args.uds)
        except OSError as exc:
            return _refused(exc.strerror)
    try:
        http = http_options(args)
        warn_frontend_no_effect(args, logger)
        if args.ray is None and args.replicas != "auto":
            logger.warning("--replicas %s has no effect without --ray (one process serves)", args.replicas)
        settings, served = _served(args)
        keyless_on_network = args.uds is None and args.host not in ("127.0.0.1", "localhost", "::1")
        if keyless_on_network and settings.api_key is None:
            logger.warning(
                "listening on %s without an API key: anyone who can reach it can use it", args.host
            )
        if "*" in (settings.allowed_origins or ()) and settings.api_key is None:
            logger.warning(
                "--allowed-origins '[\"*\"]' without an API key: any web page a user opens can use it"
            )
        if args.ray is not None:
            if args.workers > 1:
                raise ValueError("--workers is for one machine; with --ray, Ray Serve runs --replicas")
            if http.tls or http.root_path:
                raise ValueError("with --ray, Ray Serve's proxy serves HTTP: set TLS and its root path there")
            if not http.access_log or http.quiet_paths:
                logger.warning("access log flags have no effect with --ray: Ray Serve keeps its own log")
            return _serve_on_ray(args, [(one.engine_args, one.settings) for one in served])
        if args.workers > 1:
            return _serve_workers(args, http)
        app = _app(served)
    except (PoolragError, ValueError, OSError) as exc:  # a bad model path or file, a bad option
        return _refused(f"cannot start: {' '.join(str(exc).split())}")
    # uvicorn raises Ctrl-C again once drained; its command ends 0
    with contextlib.suppress(KeyboardInterrupt):
        serve(app, settings, host=args.host, port=args.port, http=http, uds=args.uds)
    return 0


def _served(args: argparse.Namespace) -> tuple[Any, list[Any]]:
    """The process's settings and each model's engine options and settings, checked (no model loads)."""
    from poolrag.cli.serve_models import from_command_line, read_models_file
    from poolrag.config.resolve import refuse_missing_folder
    from poolrag.server import ServerSettings
    from poolrag.server.host_check import for_listen_host
    from poolrag.server.state import check_unique_names

    first = args.model or args.model_option
    models = [first, *args.more_models] if first else []
    api_key, given_by = args.api_key, "--api-key"
    if api_key is None and (from_env := key_from_environment()) is not None:
        api_key, name = from_env
        given_by = f"${name}"
    if api_key is not None and not api_key.strip():
        raise ValueError(
            f"{given_by} is empty (an unset variable in a template?): give the key, or leave out "
            f"--api-key, ${API_KEY_ENV} and ${VLLM_API_KEY_ENV} to serve without one"
        )
    settings = ServerSettings(
        served_model_names=("default",),  # each model gets its own names below
        api_key=api_key or None,
        max_queue=args.max_queue,
        max_inputs=args.max_inputs,
        max_body_bytes=args.max_body_bytes,
        allowed_hosts=tuple(args.allowed_hosts) if args.allowed_hosts else None,
        allowed_origins=args.allowed_origins,
        allowed_methods=args.allowed_methods,
        allowed_headers=args.allowed_headers,
        allow_credentials=args.allow_credentials,
        max_request_tokens=args.max_request_tokens,
        max_request_chars=args.max_request_chars,
        max_inflight_bytes=args.max_inflight_bytes,
        max_inflight_tokens=args.max_inflight_tokens,
        max_answer_values=args.max_answer_values,
        header_timeout_s=args.header_timeout,
        body_timeout_s=args.body_timeout,
        keep_alive_s=args.timeout_keep_alive,
        drain_timeout_s=args.timeout_graceful_shutdown,
        retry_after_s=args.retry_after,
        idle_trim_s=args.idle_trim,
        calibration=str(Path(args.calibration).expanduser().resolve()) if args.calibration else None,
        request_id_headers=args.enable_request_id_headers,
        api_docs=not args.disable_fastapi_docs,
    )
    settings = for_listen_host(settings, args.host)
    if args.served_model_name and not models:
        raise ValueError("--served-model-name names MODEL arguments; a models file names its own")
    # the flags' engine options, which every model takes (a file's keys override them)
    base = engine_args_of(args, models[0] if models else str(args.models_file))
    served = from_command_line(models, args.served_model_name, base, settings)
    if args.models_file is not None:
        served += read_models_file(args.models_file, base, settings)
    check_unique_names([one.settings.served_model_names for one in served])
    for one in served:  # a typo in the last of several paths is said before the first model loads
        refuse_missing_folder(one.engine_args.model)
    return settings, served


def _app(served: list[Any]) -> Any:
    """The app serving every model, each engine loaded here."""
    from poolrag import Engine
    from poolrag.loaded_objects import freeze_loaded_objects
    from poolrag.server.app import create_models_app

    engines = [(Engine.from_engine_args(one.engine_args), one.settings) for one in served]
    app = create_models_app(engines)  # reads each model's quantization ranges file
    freeze_loaded_objects()
    return app


def worker_app(args: argparse.Namespace) -> tuple[Any, Any]:
    """A ``--workers`` process's app and settings, built from the same command line. A worker is a
    process of the command's own, so it takes the command's log, heap and cache settings."""
    from poolrag.cli import bound_native_memory

    log_at(args.log_level)
    bound_native_memory(SERVER_TRIM_INTERVAL_S)
    settings, served = _served(args)
    return _app(served), settings


def _serve_workers(args: argparse.Namespace, http: Any) -> int:
    """Serves from ``--workers`` processes; a worker that cannot start stops them all with its one line."""
    from poolrag.server.workers import WorkerStartError, serve_workers

    build = functools.partial(worker_app, args)
    try:
        return serve_workers(
            build, args.workers, args.host, args.port, http, args.timeout_graceful_shutdown, args.uds
        )
    except WorkerStartError as exc:
        return _refused(f"cannot start: {exc}")


def _serve_on_ray(args: argparse.Namespace, models: list[tuple[EngineArgs, Any]]) -> int:
    """The same app as replicas on Ray Serve, each replica serving every model; blocks until
    interrupted."""
    if not require_extra("serve --ray", "ray"):
        return EXIT_MISSING_EXTRA
    from poolrag.scaleout.cluster import connect
    from poolrag.scaleout.ray_serve import ReplicaPlan, running_proxy_address, serve_models_on_ray
    from poolrag.server.run import check_port_free

    plan = ReplicaPlan(replicas=None if args.replicas == "auto" else args.replicas)
    connect(args.ray, log_level=logging.INFO if args.log_level == "debug" else logging.WARNING)
    if not args.ray.startswith("ray://") and running_proxy_address() is None:
        try:  # the proxy will bind the port on this node (through Ray Client, on the cluster's)
            check_port_free(args.host, args.port)
        except OSError as exc:
            return _refused(exc.strerror)
    with sigterm_interrupts():  # SIGTERM drains and removes the app as Ctrl-C does
        try:
            serve_models_on_ray(models, plan, host=args.host, port=args.port)
        except Terminated:
            return EXIT_TERMINATED
        except KeyboardInterrupt:
            return 0  # as uvicorn ends on Ctrl-C, and `poolrag serve` without --ray
    return 0
