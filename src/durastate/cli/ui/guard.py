"""Who may talk to the inspector, and what a page it serves may do in a browser.

The inspector shows a store's contents, so it is guarded at the door, as an
ASGI middleware in front of every route (static files included):

* **Host allow-list** (DNS rebinding). A page on ``attacker.example`` whose
  name is made to resolve to 127.0.0.1 can read a loopback server with the
  victim's browser; the one thing it cannot fake is the ``Host`` header,
  which names the attacker's host. So a request whose ``Host`` is not one of
  the allowed names is answered 421 with nothing read. Allowed by default:
  ``localhost``, ``127.0.0.1``, ``::1`` and the address the server was bound
  to; more with ``--allow-host`` (a name a proxy or a tunnel uses).
* **A token beyond loopback.** The inspector has no users; bound to an
  address other hosts reach, anyone who reaches it would read the store. So
  ``durastate ui`` refuses such a bind unless a token is given, and then
  every request must carry it: ``?token=...`` once (it is kept in an
  ``HttpOnly``, ``SameSite=Strict`` cookie, and the browser is sent on to
  the same page without it) or an ``Authorization: Bearer ...`` header.
  Compared in constant time.
* **Response headers**: a Content-Security-Policy that allows only the
  inspector's own script and style files (the templates carry no inline
  script, style or event handler), no framing (``frame-ancestors 'none'``,
  ``X-Frame-Options: DENY``), ``nosniff`` and no referrer (a page URL can
  name keys).
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
TOKEN_COOKIE = "durastate_ui_token"

SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        b"form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
)


def is_loopback(host: str) -> bool:
    """True when ``host`` (a name or an address to bind) only reaches this machine."""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str:
    """The host part of a ``Host`` header value: ``[::1]:8765`` -> ``::1``, ``Example.org:80`` -> ``example.org``."""
    value = header.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else value
    if value.count(":") == 1:
        return value.split(":", 1)[0]
    return value  # a bare IPv6 address or a name without a port


def allowed_hosts(bound: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The ``Host`` names the inspector answers: loopback names, the bound address, and ``extra``."""
    names = {*LOOPBACK_NAMES, bound.strip("[]").lower()}
    names.update(host_name(name) for name in extra)
    names.discard("0.0.0.0")  # not a name a browser sends; binding it is what needs the token
    names.discard("::")
    return frozenset(names)


class Guard:
    """The ASGI middleware: the Host check, the token check (when a token is set), the security headers."""

    def __init__(self, app: ASGIApp, *, hosts: frozenset[str], token: str | None = None) -> None:
        self._app = app
        self._hosts = hosts
        self._token = token.encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = {name.lower(): value for name, value in scope.get("headers", ())}
        host = host_name(headers.get(b"host", b"").decode("latin-1"))
        if host not in self._hosts:
            await _plain(send, 421, f"this inspector does not answer for host {host!r} (see --allow-host)\n")
            return
        if self._token is not None:
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
            offered = query.get("token")
            if offered is not None:
                if not hmac.compare_digest(offered.encode(), self._token):
                    await _plain(send, 401, "wrong token\n")
                    return
                await self._redirect_with_cookie(scope, query, send)
                return
            if not self._presents_token(headers):
                await _plain(send, 401, "this inspector needs its token: open it with ?token=... once\n")
                return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *SECURITY_HEADERS]
            await send(message)

        await self._app(scope, receive, send_with_headers)

    def _presents_token(self, headers: dict[bytes, bytes]) -> bool:
        assert self._token is not None
        authorization = headers.get(b"authorization", b"")
        if authorization[:7].lower() == b"bearer " and hmac.compare_digest(authorization[7:].strip(), self._token):
            return True
        cookie: SimpleCookie = SimpleCookie()
        try:
            cookie.load(headers.get(b"cookie", b"").decode("latin-1"))
        except Exception:  # a malformed Cookie header carries no token
            return False
        morsel = cookie.get(TOKEN_COOKIE)
        return morsel is not None and hmac.compare_digest(morsel.value.encode(), self._token)

    async def _redirect_with_cookie(self, scope: Scope, query: dict[str, str], send: Send) -> None:
        assert self._token is not None
        rest = urlencode([(k, v) for k, v in query.items() if k != "token"])
        location = scope.get("path", "/") + (f"?{rest}" if rest else "")
        cookie = f"{TOKEN_COOKIE}={self._token.decode()}; HttpOnly; SameSite=Strict; Path=/"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [(b"location", location.encode()), (b"set-cookie", cookie.encode()), *SECURITY_HEADERS],
            }
        )
        await send({"type": "http.response.body", "body": b""})


async def _plain(send: Send, status: int, text: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain; charset=utf-8"), *SECURITY_HEADERS],
        }
    )
    await send({"type": "http.response.body", "body": text.encode()})
