"""``vllm serve``'s frontend flags on ``poolrag serve``: the ones with a counterpart work (TLS, the
root path behind a proxy, uvicorn's log, request ids, the docs switch), the generation-only ones
are accepted with one warning, and a TLS file that cannot load stops the command before the model
loads."""

from __future__ import annotations

import logging
import re
import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import trustme

import poolrag
from poolrag.cli import build_parser, main
from poolrag.cli.vllm_frontend import http_options, warn_frontend_no_effect

from .conftest import cli_server

KEY = "frontend-key"


def _args(*flags: str) -> object:
    return build_parser().parse_args(["serve", "some/model", *flags])


def test_a_deployment_line_parses_into_uvicorn_settings() -> None:
    args = _args(
        "--uvicorn-log-level",
        "warning",
        "--disable-uvicorn-access-log",
        "--root-path",
        "/embed",
        "--disable-access-log-for-endpoints",
        "/health, /metrics",
        "--tokenizer-mode",
        "auto",
    )
    http = http_options(args)  # type: ignore[arg-type]
    assert (http.log_level, http.access_log, http.root_path) == ("warning", False, "/embed")
    assert http.quiet_paths == {"/health", "/metrics"} and http.tls == {}
    assert http_options(_args("--log-level", "debug")).log_level == "debug"  # type: ignore[arg-type]


def test_disable_log_requests_keeps_the_access_log_as_in_vllm() -> None:
    """vLLM's ``--disable-log-requests`` (deprecated, its default since 0.10) silences its log of
    request contents, never uvicorn's access lines: a ported ``vllm serve ... --disable-log-requests``
    line keeps one line per request; ``--disable-uvicorn-access-log`` is the switch that drops them."""
    assert http_options(_args("--disable-log-requests")).access_log is True  # type: ignore[arg-type]
    assert http_options(_args("--disable-uvicorn-access-log")).access_log is False  # type: ignore[arg-type]


def test_generation_only_flags_are_accepted_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    args = _args("--api-server-count", "4", "--limit-mm-per-prompt", '{"image": 1}', "--enable-log-outputs")
    with caplog.at_level(logging.WARNING, logger="poolrag.cli"):
        warn_frontend_no_effect(args, logging.getLogger("poolrag.cli.serve"))  # type: ignore[arg-type]
    first, second = (record.getMessage() for record in caplog.records)
    assert "--api-server-count, --enable-log-outputs, --limit-mm-per-prompt" in first
    assert "--workers N" in second


def test_a_tokenizer_mode_poolrag_does_not_run_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        _args("--tokenizer-mode", "mistral")
    assert stopped.value.code == 2 and "invalid choice: 'mistral'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--ssl-keyfile", "{missing}"], "need --ssl-certfile"),
        (["--ssl-certfile", "{missing}"], "--ssl-certfile {missing}: no such file"),
        (["--ssl-certfile", "{not_pem}"], "the TLS files do not load"),
        (["--enable-log-requests", "--disable-log-requests"], "not both"),
    ],
)
def test_a_flag_that_cannot_work_stops_the_command_before_the_model_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], says: str
) -> None:
    names = {"missing": str(tmp_path / "nowhere.pem"), "not_pem": str(tmp_path / "cert.pem")}
    (tmp_path / "cert.pem").write_text("not a certificate")
    given = [flag.format(**names) for flag in flags]
    assert main(["serve", str(tmp_path / "no-model-here"), "--port", "0", *given]) == 2
    err = capsys.readouterr().err
    assert err.startswith("poolrag serve: cannot start: ") and says.format(**names) in err
    assert "Traceback" not in err


@pytest.fixture(scope="module")
def behind_a_proxy(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """Served as a proxy at ``/embed`` forwards to it, with a key, request ids, no docs, and no
    access lines for the probes."""
    log = tmp_path_factory.mktemp("frontend") / "server.log"
    flags = [
        "--root-path",
        "/embed",
        "--api-key",
        KEY,
        "--enable-request-id-headers",
        "--disable-fastapi-docs",
        "--disable-access-log-for-endpoints",
        "/health,/version",
        "--uvicorn-log-level",
        "info",
        "--log-level",
        "warning",
    ]
    unbuffered = {"PYTHONUNBUFFERED": "1"}  # uvicorn's access lines go to stdout, a file here
    with cli_server(log, str(minilm_path), "--served-model-name", "minilm", *flags, env=unbuffered) as (
        url,
        _,
    ):
        yield url, log


def test_behind_a_root_path_the_probes_stay_public_and_the_rest_needs_the_key(
    behind_a_proxy: tuple[str, Path],
) -> None:
    url, _ = behind_a_proxy
    with httpx.Client(timeout=60) as http:
        assert http.get(f"{url}/health").status_code == 200
        assert http.get(f"{url}/version").json() == {"version": poolrag.__version__}
        assert http.post(f"{url}/v1/embeddings", json={"input": "hi"}).status_code == 401
        keyed = {"Authorization": f"Bearer {KEY}"}
        embedded = http.post(f"{url}/v1/embeddings", json={"input": "hi"}, headers=keyed)
        assert embedded.status_code == 200 and len(embedded.json()["data"][0]["embedding"]) == 384
        metrics = http.get(f"{url}/metrics", headers=keyed).text
        assert 'path="/v1/embeddings"' in metrics and 'path="/embed/v1/embeddings"' not in metrics


def test_request_ids_come_back_on_answers_and_refusals(behind_a_proxy: tuple[str, Path]) -> None:
    url, _ = behind_a_proxy
    with httpx.Client(timeout=60) as http:
        echoed = http.get(f"{url}/health", headers={"X-Request-Id": "trace-42"})
        assert echoed.headers["x-request-id"] == "trace-42"
        refused = http.post(f"{url}/v1/embeddings", json={"input": "hi"})
        fresh = http.get(f"{url}/health")
        assert refused.status_code == 401
        ids = [refused.headers["x-request-id"], fresh.headers["x-request-id"]]
        assert all(re.fullmatch(r"[0-9a-f]{32}", one) for one in ids) and ids[0] != ids[1]


def test_without_docs_the_api_description_is_not_served(behind_a_proxy: tuple[str, Path]) -> None:
    url, _ = behind_a_proxy
    with httpx.Client(timeout=60) as http:
        for path in ("/docs", "/redoc", "/openapi.json"):
            assert http.get(f"{url}{path}").status_code == 404, path


def test_quiet_endpoints_leave_no_access_line(behind_a_proxy: tuple[str, Path]) -> None:
    url, log = behind_a_proxy
    with httpx.Client(timeout=60) as http:
        http.get(f"{url}/health")
        http.get(f"{url}/version")
        http.get(f"{url}/v1/models", headers={"Authorization": f"Bearer {KEY}"})
    text = log.read_text()
    assert '"GET /embed/v1/models HTTP/1.1" 200' in text
    assert "GET /embed/health" not in text and "GET /embed/version" not in text


def test_tls_serves_https_with_the_given_certificate(minilm_path: Path, tmp_path: Path) -> None:
    authority = trustme.CA()
    certificate = authority.issue_cert("127.0.0.1", "localhost")
    chain, key = tmp_path / "server.pem", tmp_path / "server.key"
    certificate.cert_chain_pems[0].write_to_path(str(chain))
    for extra in certificate.cert_chain_pems[1:]:
        extra.write_to_path(str(chain), append=True)
    certificate.private_key_pem.write_to_path(str(key))
    trusted = ssl.create_default_context()
    authority.configure_trust(trusted)
    flags = ["--ssl-certfile", str(chain), "--ssl-keyfile", str(key), "--log-level", "warning"]
    with cli_server(tmp_path / "server.log", str(minilm_path), *flags, tls=trusted) as (url, _):
        assert url.startswith("https://")
        with httpx.Client(timeout=60, verify=trusted) as http:
            embedded = http.post(f"{url}/v1/embeddings", json={"input": "over TLS"})
            assert embedded.status_code == 200 and len(embedded.json()["data"][0]["embedding"]) == 384
        with pytest.raises(httpx.ConnectError), httpx.Client(timeout=10) as untrusting:  # system CAs only
            untrusting.get(f"{url}/health")
        plain = url.replace("https://", "http://")
        with pytest.raises(httpx.TransportError), httpx.Client(timeout=10) as http:
            http.get(f"{plain}/health")
