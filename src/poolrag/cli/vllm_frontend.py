"""``vllm serve``'s frontend flags on ``poolrag serve``, so a deployment's command line (a Docker
``CMD``, a Kubernetes manifest) starts with one word changed.

Those with a counterpart here are honoured: uvicorn's log level and access log, TLS, the root path
behind a proxy, ``X-Request-Id`` headers, the API docs switch. Those that concern generation, tools,
LoRA or vLLM's process layout change nothing for a pooling model and are accepted with one warning
naming them; a flag that would change what the server answers without poolrag doing it
(``--middleware``, ``--lora-modules``) stays unknown, so the command stops instead. (``--uds`` is
``poolrag serve``'s own.)
"""

from __future__ import annotations

import argparse
import logging
import ssl
from pathlib import Path
from typing import Any

from poolrag.engine_args import add_flag, positive_int
from poolrag.server.settings import HttpOptions

#: uvicorn's log levels, as ``--uvicorn-log-level`` takes them.
UVICORN_LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")

#: Frontend options (``args`` name) with no effect on a pooling server -> whether a switch.
NO_EFFECT_FRONTEND: dict[str, bool] = {
    "api_server_count": False,
    "limit_mm_per_prompt": False,
    "generation_config": False,
    "response_role": False,
    "chat_template_content_format": False,
    "enable_auto_tool_choice": True,
    "tool_call_parser": False,
    "enable_prompt_tokens_details": True,
    "enable_force_include_usage": True,
    "enable_server_load_tracking": True,
    "enable_log_outputs": True,
    "log_error_stack": True,
    "disable_frontend_multiprocessing": True,
    "h11_max_incomplete_event_size": False,
    "h11_max_header_count": False,
}


def add_frontend_flags(parser: argparse.ArgumentParser) -> None:
    """Add vLLM's frontend flags: the honoured ones to a group of their own, the rest to the group
    of flags accepted with a warning."""
    http = parser.add_argument_group("HTTP (vLLM's frontend flags)")
    add_flag(
        http,
        "--uvicorn-log-level",
        choices=UVICORN_LOG_LEVELS,
        help="uvicorn's own log level (default: --log-level)",
    )
    add_flag(http, "--disable-uvicorn-access-log", action="store_true", help="no access log line per request")
    add_flag(
        http,
        "--disable-access-log-for-endpoints",
        metavar="PATHS",
        help="comma-separated paths whose requests leave no access log line (e.g. /health,/metrics)",
    )
    add_flag(
        http,
        "--enable-log-requests",
        action="store_true",
        help="an access log line per request (the default; vLLM's spelling)",
    )
    add_flag(http, "--root-path", default="", help="the path prefix a proxy serves the server under")
    add_flag(http, "--ssl-keyfile", metavar="FILE", help="TLS private key (with --ssl-certfile)")
    add_flag(http, "--ssl-certfile", metavar="FILE", help="TLS certificate chain: serve HTTPS")
    add_flag(
        http,
        "--ssl-ca-certs",
        metavar="FILE",
        help="CA certificates that client certificates are checked against",
    )
    add_flag(
        http,
        "--ssl-cert-reqs",
        type=int,
        choices=(int(ssl.CERT_NONE), int(ssl.CERT_OPTIONAL), int(ssl.CERT_REQUIRED)),
        help="whether a client certificate is required (ssl's CERT_*: 0 none, 1 optional, 2 required)",
    )
    add_flag(http, "--ssl-ciphers", metavar="CIPHERS", help="TLS 1.2 cipher suites (OpenSSL's list form)")
    add_flag(
        http,
        "--enable-request-id-headers",
        action="store_true",
        help="answer with an X-Request-Id header (the request's own, else a fresh one)",
    )
    add_flag(http, "--disable-fastapi-docs", action="store_true", help="no /docs, /redoc or /openapi.json")
    add_flag(
        http,
        "--tokenizer-mode",
        choices=("auto", "hf"),
        default="auto",
        help="vLLM's tokenizer mode: auto or hf only (poolrag runs the folder's Hugging Face tokenizer)",
    )
    ignored = parser.add_argument_group(
        "vLLM frontend options with no effect here (accepted with one warning)"
    )
    for name, is_switch in NO_EFFECT_FRONTEND.items():
        flag = "--" + name.replace("_", "-")
        if is_switch:
            add_flag(ignored, flag, dest=name, action="store_true", default=None)
        elif name == "api_server_count":
            add_flag(ignored, flag, "-asc", dest=name, type=positive_int, metavar="N")
        else:
            add_flag(ignored, flag, dest=name, metavar="VALUE")


def http_options(args: argparse.Namespace) -> HttpOptions:
    """The uvicorn settings the command line asks for; ``ValueError`` names a flag that cannot work
    (a TLS file that is missing or does not load), before any model loads."""
    if args.disable_log_requests and args.enable_log_requests:
        raise ValueError("give --enable-log-requests or --disable-log-requests, not both")
    quiet = frozenset(
        path.strip() for path in (args.disable_access_log_for_endpoints or "").split(",") if path.strip()
    )
    return HttpOptions(
        log_level=args.uvicorn_log_level or args.log_level,
        # vLLM's --disable-log-requests silences its log of request contents (off by default since
        # 0.10; poolrag writes none), never uvicorn's access log: a ported line keeps its access lines
        access_log=not args.disable_uvicorn_access_log,
        quiet_paths=quiet,
        root_path=args.root_path,
        tls=_tls(args),
    )


def _tls(args: argparse.Namespace) -> dict[str, Any]:
    options = {
        "ssl_keyfile": args.ssl_keyfile,
        "ssl_certfile": args.ssl_certfile,
        "ssl_ca_certs": args.ssl_ca_certs,
        "ssl_cert_reqs": args.ssl_cert_reqs,
        "ssl_ciphers": args.ssl_ciphers,
    }
    given = {key: value for key, value in options.items() if value is not None}
    if not given:
        return {}
    if args.ssl_certfile is None:
        flags = ", ".join("--" + key.replace("_", "-") for key in given)
        raise ValueError(f"{flags} need --ssl-certfile (the certificate to serve HTTPS with)")
    for key in ("ssl_keyfile", "ssl_certfile", "ssl_ca_certs"):
        if key in given and not Path(given[key]).expanduser().is_file():
            raise ValueError(f"--{key.replace('_', '-')} {given[key]}: no such file")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:  # the files load now, not after the model did
        context.load_cert_chain(args.ssl_certfile, args.ssl_keyfile)
        if args.ssl_ca_certs:
            context.load_verify_locations(args.ssl_ca_certs)
        if args.ssl_ciphers:
            context.set_ciphers(args.ssl_ciphers)
    except (ssl.SSLError, OSError) as exc:
        raise ValueError(f"the TLS files do not load: {exc}") from None
    if args.ssl_cert_reqs and not args.ssl_ca_certs:
        raise ValueError("--ssl-cert-reqs asks for client certificates: give --ssl-ca-certs to check them")
    return given


def warn_frontend_no_effect(args: argparse.Namespace, log: logging.Logger) -> None:
    """One warning naming the given frontend flags that change nothing here."""
    given = sorted(name for name in NO_EFFECT_FRONTEND if getattr(args, name, None) is not None)
    if not given:
        return
    flags = ", ".join("--" + name.replace("_", "-") for name in given)
    log.warning("accepted but no effect in poolrag (vLLM frontend options): %s", flags)
    if args.api_server_count is not None and args.api_server_count > 1:
        log.warning(
            "--api-server-count: one poolrag process serves HTTP and runs the model; --workers N runs "
            "N processes, each with its own copy of the model"
        )
