"""What the HTTP client does when the network or the server fails under it: a connection lost before
the answer (a server killed mid-request, restarting) is sent again, a bounded number of times, then
said in one line naming the server; a certificate this machine does not trust is said at once, with
what to pass."""

from __future__ import annotations

import asyncio
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import trustme

from poolrag import Engine, InvalidInputError
from poolrag.client import PoolragClient, RemoteError, ServedModelChangedError
from poolrag.server import ServerSettings, create_app
from poolrag.testing.fault_proxy import FaultProxy
from poolrag.testing.live_server import LiveServer, serve
from poolrag.testing.rag_corpus import TEXTS


@pytest.fixture(scope="module")
def minilm_url(minilm_engine: Engine) -> Iterator[str]:
    yield from serve(minilm_engine, "minilm")


@pytest.fixture
def proxy(minilm_url: str) -> Iterator[FaultProxy]:
    with FaultProxy(_port(minilm_url)) as faulty:
        yield faulty


def test_a_request_whose_connection_is_lost_before_the_answer_is_sent_again(
    proxy: FaultProxy, minilm_engine: Engine
) -> None:
    """The server died with the request (the proxy closes the connection without an answer), then
    answers again: every call is idempotent, so the client sends it again and returns every vector,
    in order."""
    expected = minilm_engine.embed_array(TEXTS)
    with PoolragClient(proxy.url, max_retries=2, max_inputs_per_request=3) as client:
        client.facts  # noqa: B018 - read before the faults, so each fault hits an embedding request
        proxy.set_fault("drop", 2)
        np.testing.assert_allclose(client.embed_array(TEXTS), expected, atol=1e-6, rtol=0)
        proxy.set_fault("drop", 2)
        np.testing.assert_allclose(asyncio.run(client.aembed_array(TEXTS)), expected, atol=1e-6, rtol=0)
    assert proxy.faults_left == 0


def test_a_connection_lost_every_time_is_given_up_in_bounded_time_in_one_line(proxy: FaultProxy) -> None:
    proxy.set_fault("drop", 100)
    started = time.monotonic()
    with PoolragClient(proxy.url, max_retries=2) as client, pytest.raises(ConnectionError) as failed:
        client.embed_array(["a"])
    assert isinstance(failed.value, RemoteError)
    assert time.monotonic() - started < 5  # 0.5 s + 1 s of backoff at most
    message = str(failed.value)
    assert message.startswith(f"poolrag server at {proxy.url} closed the connection before its answer ended")
    assert "(3 attempts over" in message and "max_retries=" in message and "\n" not in message
    assert proxy.connections == 3


def test_the_backoff_between_attempts_is_capped(proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    """Many retries wait ``MAX_BACKOFF_S`` each at most, not 0.5 s doubling without end."""
    from poolrag.client import client as client_module

    monkeypatch.setattr(client_module, "MAX_BACKOFF_S", 0.6)
    proxy.set_fault("drop", 100)
    started = time.monotonic()
    with PoolragClient(proxy.url, max_retries=6) as client, pytest.raises(RemoteError, match="7 attempts"):
        client.embed_array(["a"])
    assert time.monotonic() - started < 0.5 + 5 * 0.6 + 2  # uncapped: 31.5 s


def test_an_error_quoting_a_garbled_answer_is_one_short_line() -> None:
    """A peer that is not HTTP (or a connection two processes write on) answers garbage; httpx quotes
    all of it in its error, kilobytes of it, over several lines."""

    class Garbage(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            self.rfile.readline()
            self.wfile.write(b"\r\n".join([b"x" * 4000] * 3) + b"\r\n\r\n")

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Garbage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with PoolragClient(url, max_retries=0) as client, pytest.raises(RemoteError) as failed:
            client.embed_array(["a"])
    finally:
        server.shutdown()
        server.server_close()
    assert "\n" not in str(failed.value) and len(str(failed.value)) < 700


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def https_url(
    minilm_engine: Engine, authority: trustme.CA, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("tls")
    certificate = authority.issue_cert("127.0.0.1")
    chain, key = folder / "server.pem", folder / "server.key"
    certificate.cert_chain_pems[0].write_to_path(str(chain))
    certificate.private_key_pem.write_to_path(str(key))
    app = create_app(minilm_engine, ServerSettings(served_model_names=("minilm",)))
    with LiveServer(app, tls={"ssl_certfile": str(chain), "ssl_keyfile": str(key)}) as live:
        yield live.url


def test_an_untrusted_certificate_is_said_at_once_with_what_to_pass(
    https_url: str,
    authority: trustme.CA,
    tmp_path: Path,
    minilm_engine: Engine,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    # counted at the proxy, which passes the TLS bytes as they are: a time bound (0.5 s, the first
    # backoff's most) also caught a loaded machine's slow handshake
    with FaultProxy(_port(https_url)) as counting:
        url = counting.url.replace("http://", "https://")
        with PoolragClient(url, max_retries=2) as client, pytest.raises(RemoteError) as failed:
            client.embed_array(["over TLS"])
        assert counting.connections == 1  # not retried: no wait makes the certificate trusted
    assert str(failed.value).startswith(f"the TLS certificate of {url} is not trusted here")
    assert "pass verify=" in str(failed.value)
    bundle = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(bundle))
    for verify in (str(bundle), bundle):
        with PoolragClient(https_url, verify=verify) as client:
            got = client.embed_array(["over TLS"])
        np.testing.assert_allclose(got, minilm_engine.embed_array(["over TLS"]), atol=1e-6, rtol=0)
        assert asyncio.run(PoolragClient(https_url, verify=verify).aembed_array(["over TLS"])).shape == (
            1,
            384,
        )
    with pytest.raises(InvalidInputError, match="is not a readable PEM CA bundle"):
        PoolragClient(https_url, verify=str(tmp_path / "missing.pem"))


def test_a_free_port_is_not_retried_past_max_retries() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(
        RemoteError, match=r"^cannot reach poolrag server at .* \(2 attempts over .*is it running"
    ):
        PoolragClient(f"http://127.0.0.1:{port}", max_retries=1).embed_array(["a"])


def test_another_models_vectors_are_refused_when_a_proxy_dropped_the_identity_headers(
    minilm_engine: Engine, tiny_model: Callable[..., Path]
) -> None:
    """The server restarts with another model under the same name, behind a proxy that passes only
    headers it knows: the answer's width still says it is another model, so 32-dimensional vectors
    are not returned as the 384-dimensional model's, into a cache or collection keyed on its facts."""
    settings = ServerSettings(served_model_names=("embedder",))
    with LiveServer(create_app(minilm_engine, settings)) as first:
        port = _port(first.url)
        proxy = FaultProxy(port)
        proxy.hide_identity = True
        client = PoolragClient(proxy.url)
        assert client.embed_array(["before"]).shape == (1, 384)
    with proxy, Engine(tiny_model("bert")) as other, LiveServer(create_app(other, settings), port=port):
        with pytest.raises(ServedModelChangedError, match="answered 32-dimensional vectors, but embedder's"):
            client.embed_array(["after"])
        assert client.embed_array(["after"]).shape == (1, 32)  # the new facts, read again
        assert client.facts.embedding_dim == 32
        client.close()


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])
