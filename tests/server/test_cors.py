"""CORS: no headers by default, so a keyless loopback server stays unreadable to the web pages a
user opens (vLLM allows any origin); vLLM's ``--allowed-origins`` and its three companions turn it on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from poolrag import Engine
from poolrag.cli import main

from .conftest import API_KEY, Served, cli_server, serve_in_thread

ORIGIN = "http://app.example"
PREFLIGHT = {
    "Origin": ORIGIN,
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "authorization, content-type",
}
KEY = {"Authorization": f"Bearer {API_KEY}"}


def _cors_headers(response: httpx.Response) -> dict[str, str]:
    return {name: value for name, value in response.headers.items() if name.startswith("access-control-")}


@pytest.fixture(scope="module")
def cors_server(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``poolrag serve --allowed-origins '["http://app.example"]' --api-key ...``."""
    log = tmp_path_factory.mktemp("cors-server") / "server.log"
    flags = ["--allowed-origins", json.dumps([ORIGIN]), "--api-key", API_KEY, "--log-level", "warning"]
    with cli_server(log, str(minilm_path), *flags) as (url, _):
        yield url


def test_no_cors_headers_by_default(minilm_server: Served) -> None:
    preflight = httpx.options(f"{minilm_server.url}/v1/embeddings", headers=PREFLIGHT)
    posted = httpx.post(f"{minilm_server.url}/v1/embeddings", json={"input": "x"}, headers={"Origin": ORIGIN})
    assert posted.status_code == 200
    assert _cors_headers(preflight) == {} and _cors_headers(posted) == {}


def test_a_listed_origins_preflight_passes_without_the_key(cors_server: str) -> None:
    """Browsers send a preflight without credentials: it must not meet the API key's 401."""
    preflight = httpx.options(f"{cors_server}/v1/embeddings", headers=PREFLIGHT)
    assert preflight.status_code == 200, preflight.text
    allowed = _cors_headers(preflight)
    assert allowed["access-control-allow-origin"] == ORIGIN
    assert "POST" in allowed["access-control-allow-methods"]
    assert "authorization" in allowed["access-control-allow-headers"]


def test_a_listed_origin_can_read_answers_and_errors(cors_server: str) -> None:
    posted = httpx.post(
        f"{cors_server}/v1/embeddings", json={"input": "x"}, headers={"Origin": ORIGIN, **KEY}, timeout=60
    )
    assert posted.status_code == 200
    assert posted.headers["access-control-allow-origin"] == ORIGIN
    keyless = httpx.post(f"{cors_server}/v1/embeddings", json={"input": "x"}, headers={"Origin": ORIGIN})
    assert keyless.status_code == 401 and keyless.headers["access-control-allow-origin"] == ORIGIN


def test_an_origin_not_listed_gets_no_allow_header(cors_server: str) -> None:
    other = {"Origin": "http://evil.example"}
    preflight = httpx.options(f"{cors_server}/v1/embeddings", headers={**PREFLIGHT, **other})
    assert preflight.status_code == 400
    assert preflight.json()["error"]["code"] == "cors_refused"
    assert "access-control-allow-origin" not in preflight.headers
    posted = httpx.post(f"{cors_server}/v1/embeddings", json={"input": "x"}, headers={**other, **KEY})
    assert posted.status_code == 200 and "access-control-allow-origin" not in posted.headers


def test_methods_headers_and_credentials_and_the_host_check(minilm_engine: Engine) -> None:
    """A keyless loopback server with CORS still answers only to its loopback names."""
    settings = {
        "allowed_origins": (ORIGIN,),
        "allowed_methods": ("POST",),
        "allowed_headers": ("content-type",),
        "allow_credentials": True,
    }
    with serve_in_thread(minilm_engine, **settings) as url:
        asked = {**PREFLIGHT, "Access-Control-Request-Headers": "content-type"}
        preflight = httpx.options(f"{url}/v1/embeddings", headers=asked)
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-credentials"] == "true"
        for refused in (
            {"Access-Control-Request-Method": "DELETE"},
            {"Access-Control-Request-Headers": "x-a"},
        ):
            answer = httpx.options(f"{url}/v1/embeddings", headers={**asked, **refused})
            assert answer.status_code == 400 and answer.json()["error"]["code"] == "cors_refused"
        rebound = httpx.options(f"{url}/v1/embeddings", headers={**asked, "Host": "app.example"})
        assert rebound.status_code == 400 and rebound.json()["error"]["code"] == "invalid_host"
        assert _cors_headers(rebound) == {}


@pytest.mark.parametrize("flag", ["--allowed-methods", "--allowed_headers"])
def test_a_cors_option_without_origins_stops_the_start(capsys: pytest.CaptureFixture[str], flag: str) -> None:
    """vLLM would allow every origin here; poolrag names what is missing instead of doing nothing."""
    assert main(["serve", "some/model", "--port", "0", flag, '["POST"]']) == 2
    named = flag.replace("_", "-")  # argparse takes either spelling; the error names the flag's
    assert f"({named}) needs allowed_origins (--allowed-origins)" in capsys.readouterr().err


def test_an_empty_origin_list_stops_the_start(capsys: pytest.CaptureFixture[str]) -> None:
    """``[]`` would switch on a CORS that refuses every page: that is no CORS, said so."""
    assert main(["serve", "some/model", "--port", "0", "--allowed-origins", "[]"]) == 2
    assert "allowed_origins is empty" in capsys.readouterr().err
