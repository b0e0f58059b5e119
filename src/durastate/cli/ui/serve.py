"""How ``durastate ui`` starts serving: listen first, then say where, then serve.

* **Nothing is announced before the server listens.** ``listen`` binds the
  socket uvicorn then serves (``serve``), so a taken port (exit 4), a
  ``--host`` that is no address of this machine or does not resolve (a
  usage error, exit 2) or any other failure to bind (exit 1) stops the
  command before it prints a URL or a token, or opens the store.
* **The URL it prints works.** ``0.0.0.0`` and ``::`` are not addresses a
  browser can open, and the Host check (``guard.allowed_hosts``, against
  DNS rebinding) answers only loopback names, the bound address and
  ``--allow-host`` names; so for those binds ``startup_lines`` prints a
  loopback URL and, beyond loopback, which names are answered and that other
  machines need ``--allow-host NAME``. Such a bind is not refused: a
  container's published port is reached as ``localhost``, which is answered.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Iterable

import click
import uvicorn

from .._common import PortInUse
from .guard import LOOPBACK_NAMES, host_name, is_loopback

UVICORN_STARTUP_FAILURE = 3  # uvicorn's exit code whenever its server cannot start


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port`` (``port`` 0: any free one), or the command's error (module docstring)."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise click.BadParameter(
            f"{host!r} is not an address or a name that resolves ({exc})", param_hint="--host"
        ) from None
    family, _, _, _, address = found[0]
    try:
        return socket.create_server(address, family=family)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(f"port {port} on {host} is in use: pick another with --port") from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise click.BadParameter(
                f"{host} is not an address of this machine (127.0.0.1 or 0.0.0.0 are)", param_hint="--host"
            ) from None
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def startup_lines(
    host: str, port: int, *, token: str | None, allow_hosts: Iterable[str], allow_writes: bool
) -> list[str]:
    """What ``durastate ui`` prints once it listens on ``host:port``: a URL that opens the inspector, and,
    bound beyond loopback, that every request needs the token and which ``Host`` names are answered."""
    unspecified = host.strip("[]") in ("0.0.0.0", "::")
    # An unspecified bind has no address of its own to open: loopback reaches it (IPv6 loopback for "::", which
    # Python binds IPv6-only).
    opened = ("::1" if ":" in host else "127.0.0.1") if unspecified else host
    base = f"http://{_url_host(opened)}:{port}/"
    mode = "redrive and purge of dead letters allowed" if allow_writes else "read-only"
    where = f"; listening on {_url_host(host)}:{port}" if unspecified else ""
    lines = []
    if not is_loopback(host):
        lines.append(
            f"warning: {host} is reachable from other machines; every request needs the token "
            f"(open {base}?token={token} once)"
        )
        extra = [host_name(name) for name in allow_hosts]
        answered = ", ".join([*extra, *([] if unspecified else [host]), *LOOPBACK_NAMES])
        if extra:
            lines.append(
                f"it answers requests for {answered} (the Host names --allow-host adds, against DNS rebinding)"
            )
        else:
            lines.append(
                f"note: it answers only requests for {answered} (against DNS rebinding): for other machines "
                "to reach it by another name or address, add --allow-host NAME (the one they open it by)"
            )
    lines.append(f"durastate inspector on {base} ({mode}{where}; Ctrl-C stops)")
    return lines


def serve(app: object, listening: socket.socket) -> None:
    """Serve ``app`` on the socket ``listen`` made until Ctrl-C."""
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))  # type: ignore[arg-type]
    try:
        server.run(sockets=[listening])
    except SystemExit as exc:
        if exc.code == UVICORN_STARTUP_FAILURE:  # its own log line above says why
            raise click.ClickException("the inspector's server could not start (see above)") from None
        raise
