"""Refuse requests whose ``Host`` header names a host the server does not answer to.

A web page can make a browser send requests to ``127.0.0.1`` under a name it controls (DNS
rebinding); the browser then lets the page read the answers. A keyless server on loopback is
exactly what such a page looks for, so by default it answers only to its loopback names.
"""

from __future__ import annotations

import dataclasses
import ipaddress

from starlette.types import ASGIApp, Receive, Scope, Send

from poolrag.server.errors import APIError, error_response
from poolrag.server.settings import LOOPBACK_HOSTS, ServerSettings


def host_name(value: str) -> str:
    """The host part of a ``Host`` header, without its port, lower-cased (``[::1]:80`` → ``[::1]``)."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[: value.find("]") + 1] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return address == "localhost"


def _is_wildcard(host: str) -> bool:
    try:
        return not host or ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False  # a name (``$(hostname)``, 127.1) binds the one address it resolves to


def for_listen_host(settings: ServerSettings, host: str) -> ServerSettings:
    """``settings`` for a server listening on ``host``: bound to every address (``0.0.0.0``, ``::``)
    with no host list, it answers to any name, also on connections that reach it through loopback,
    where the check would otherwise read the connection's own address: a sidecar proxy or a proxy on
    the same machine forwarding ``Host: poolrag.default.svc`` to 127.0.0.1. A server bound to one
    address only sees connections to it, which the check reads right (a name resolving to loopback,
    as Debian's host name does, keeps the loopback rule)."""
    if settings.allowed_hosts is None and _is_wildcard(host):
        return dataclasses.replace(settings, allowed_hosts=("*",))
    return settings


def _refusal(name: str, *, listed: bool) -> str:
    """What an operator whose proxy sends the service's name reads: the name and the fix."""
    if listed:
        return f"Host {name!r} is not on this server's --allowed-hosts list: add it there ('*' for any)"
    return (
        f"Host {name!r} is not a name this server answers to: with no API key on a loopback address "
        "it answers to 127.0.0.1, localhost and [::1] only (DNS rebinding); behind a proxy that "
        "sends another name, pass 'poolrag serve --allowed-hosts NAME' ('*' for any) or --api-key"
    )


def effective_hosts(settings: ServerSettings, bound_host: str | None) -> frozenset[str] | None:
    """The names to accept, or ``None`` for any: the configured list, else the loopback names (and
    the address it is bound to, such as 127.0.0.2) for a keyless server bound to loopback."""
    if settings.allowed_hosts is not None:
        names = frozenset(host_name(h) for h in settings.allowed_hosts)
        return None if "*" in names else names
    if settings.api_key is None and bound_host is not None and _is_loopback(bound_host):
        return frozenset(LOOPBACK_HOSTS) | {host_name(bound_host)}
    return None


class HostCheckMiddleware:
    def __init__(self, app: ASGIApp, settings: ServerSettings) -> None:
        self.app = app
        self.settings = settings
        self._by_bound_host: dict[str | None, frozenset[str] | None] = {}

    def _allowed(self, scope: Scope) -> frozenset[str] | None:
        server = scope.get("server")
        bound = server[0] if server else None
        if bound not in self._by_bound_host:
            self._by_bound_host[bound] = effective_hosts(self.settings, bound)
        return self._by_bound_host[bound]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        allowed = self._allowed(scope)
        if allowed is not None:
            host = next((v for k, v in scope.get("headers", ()) if k == b"host"), b"")
            name = host_name(host.decode("latin-1"))
            if name not in allowed:
                listed = self.settings.allowed_hosts is not None
                error = APIError(400, _refusal(name[:100], listed=listed), code="invalid_host")
                await error_response(error)(scope, receive, send)
                return
        await self.app(scope, receive, send)
