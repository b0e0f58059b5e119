"""The inspector's door: Host allow-list (DNS rebinding), the token beyond loopback, the security headers."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from starlette.testclient import TestClient

import durastate
from durastate.cli.ui import create_app
from durastate.cli.ui.guard import allowed_hosts, host_name, is_loopback

TOKEN = "s3cret-token-of-24-chars"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[durastate.Store]:
    with durastate.open(f"sqlite://{tmp_path / 'ui.db'}") as opened:
        opened.kv.put(b"run", b"cfg", b"model", b"small")
        yield opened


def client(app: object, host: str) -> TestClient:
    return TestClient(app, base_url=f"http://{host}", follow_redirects=False)  # type: ignore[arg-type]


@pytest.mark.parametrize("host", ["127.0.0.1:8765", "localhost:8765", "[::1]:8765", "LOCALHOST"])
def test_loopback_hosts_are_answered_with_security_headers(store: durastate.Store, host: str) -> None:
    response = client(create_app(store), host).get("/kv?scope=run&ns=cfg")
    assert response.status_code == 200
    assert "model" in response.text
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"


@pytest.mark.parametrize("path", ["/", "/kv?scope=run&ns=cfg", "/static/htmx.min.js"])
def test_a_rebound_host_name_is_refused_before_anything_is_read(store: durastate.Store, path: str) -> None:
    response = client(create_app(store), "attacker.example:8765").get(path)
    assert response.status_code == 421
    assert "attacker.example" in response.text and "small" not in response.text


def test_allow_host_adds_a_name(store: durastate.Store) -> None:
    app = create_app(store, allow_hosts=["inspector.internal:443"])
    assert client(app, "inspector.internal").get("/").status_code == 200
    assert client(app, "other.internal").get("/").status_code == 421


def test_pages_carry_no_inline_script_or_style(store: durastate.Store) -> None:
    """The CSP allows only 'self': an inline <script> or <style> in a template would silently stop working."""
    page = client(create_app(store), "127.0.0.1").get("/").text
    assert "<script>" not in page and "<style" not in page and " style=" not in page and " on" + "click" not in page
    assert '<script src="/static/inspector.js">' in page


def test_with_a_token_every_request_needs_it(store: durastate.Store) -> None:
    app = create_app(store, bound="0.0.0.0", token=TOKEN)
    browser = client(app, "127.0.0.1:8765")
    assert browser.get("/kv").status_code == 401
    assert browser.get("/kv?token=wrong-token-of-24-chars!").status_code == 401
    entry = browser.get(f"/kv?scope=run&token={TOKEN}&ns=cfg")
    assert entry.status_code == 303
    assert entry.headers["location"] == "/kv?scope=run&ns=cfg"  # the token leaves the address bar
    cookie = entry.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    browser.cookies.set("durastate_ui_token", TOKEN)
    assert "model" in browser.get("/kv?scope=run&ns=cfg").text
    bearer = client(app, "127.0.0.1").get("/", headers={"Authorization": f"Bearer {TOKEN}"})
    assert bearer.status_code == 200
    assert client(app, "127.0.0.1").get("/", headers={"Cookie": "durastate_ui_token=nope"}).status_code == 401


@pytest.mark.parametrize(
    ("header", "name"),
    [("127.0.0.1:80", "127.0.0.1"), ("[::1]:8765", "::1"), ("Example.ORG", "example.org"), ("::1", "::1")],
)
def test_host_name(header: str, name: str) -> None:
    assert host_name(header) == name


def test_loopback_and_allowed_names() -> None:
    assert is_loopback("127.0.0.2") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.0.2.1") and not is_loopback("example.org")
    assert "0.0.0.0" not in allowed_hosts("0.0.0.0")
    assert "192.0.2.1" in allowed_hosts("192.0.2.1")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(args: list[str]) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DURASTATE_")}
    return subprocess.Popen(
        [sys.executable, "-m", "durastate.cli", "ui", *args], env=env, stderr=subprocess.PIPE, text=True
    )


def test_cli_beyond_loopback_makes_and_prints_a_token(tmp_path: Path) -> None:
    with durastate.open(f"sqlite://{tmp_path / 'ui.db'}") as opened:
        opened.kv.put(b"run", b"cfg", b"model", b"small")
    port = _free_port()
    server = _serve(["--url", f"sqlite://{tmp_path / 'ui.db'}", "--host", "0.0.0.0", "--port", str(port)])
    try:
        assert server.stderr is not None
        warning = server.stderr.readline()
        assert warning.startswith("warning: 0.0.0.0 is reachable from other machines")
        printed = warning.split("(open ", 1)[1].split(" once", 1)[0]  # the URL it says to open: it must answer
        base, token = printed.split("/?token=")
        assert base == f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:  # readiness probe: the server answers 401 without the token once it listens
            try:
                urllib.request.urlopen(base + "/", timeout=5)
                raise AssertionError("answered without the token")
            except urllib.error.HTTPError as refused:
                assert refused.code == 401
                break
            except (urllib.error.URLError, ConnectionError):
                assert server.poll() is None and time.monotonic() < deadline, "durastate ui did not start"
                time.sleep(0.1)
        request = urllib.request.Request(base + "/kv?scope=run&ns=cfg", headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=10) as page:
            assert b"model" in page.read()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        with opener.open(printed, timeout=10) as page:  # the token leaves for a cookie, the page opens
            assert page.url == base + "/" and b"Overview" in page.read()
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_cli_refuses_a_short_token(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "durastate.cli", "ui", "--url", f"sqlite://{tmp_path / 'x.db'}", "--token", "short"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "16 or more" in result.stderr
    assert not (tmp_path / "x.db").exists()


def _ui(*args: str) -> Any:
    from click.testing import CliRunner

    from durastate.cli.app import cli

    return CliRunner().invoke(cli, ["ui", *args])


@pytest.mark.parametrize(
    ("host", "taken", "code", "says"),
    [
        ("999.1.1.1", False, 2, "Invalid value for --host: '999.1.1.1' is not an address"),
        ("198.51.100.1", False, 2, "is not an address of this machine"),  # TEST-NET-2: no machine's own
        ("0.0.0.0", True, 4, "is in use"),
    ],
)
def test_ui_says_nothing_and_opens_nothing_before_it_listens(
    tmp_path: Path, host: str, taken: bool, code: int, says: str
) -> None:
    db = tmp_path / "new.db"
    with socket.create_server((host if taken else "127.0.0.1", 0)) as holder:
        port = holder.getsockname()[1] if taken else 0
        result = _ui("--url", f"sqlite://{db}", "--allow-writes", "--host", host, "--port", str(port))
    assert result.exit_code == code, result.output
    assert says in result.stderr
    # No URL, no token (a token printed for a server that never ran), no store created.
    assert "inspector on" not in result.stderr and "token" not in result.stderr
    assert not db.exists()


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_ui_prints_a_url_that_opens_the_inspector(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: str) -> None:
    import uvicorn

    if host == "::" and not socket.has_ipv6:
        pytest.skip("no IPv6")
    served: dict[str, Any] = {}

    def run(server: uvicorn.Server, sockets: list[socket.socket] | None = None) -> None:
        assert sockets is not None
        served.update(app=server.config.app, port=sockets[0].getsockname()[1])

    monkeypatch.setattr(uvicorn.Server, "run", run)
    with durastate.open(f"sqlite://{tmp_path / 'ui.db'}") as opened:
        opened.kv.put(b"run", b"cfg", b"model", b"small")
    result = _ui("--url", f"sqlite://{tmp_path / 'ui.db'}", "--host", host, "--port", "0", "--token", TOKEN)
    assert result.exit_code == 0, result.output
    loopback = "[::1]" if host == "::" else "127.0.0.1"
    base = f"http://{loopback}:{served['port']}"  # the port it listens on, not the 0 it was given
    assert f"(open {base}/?token={TOKEN} once)" in result.stderr
    assert "add --allow-host NAME" in result.stderr  # why another machine's request would get a 421
    assert f"durastate inspector on {base}/ (read-only; listening on" in result.stderr
    browser = TestClient(served["app"], base_url=base, follow_redirects=True)
    assert "Overview" in browser.get(f"{base}/?token={TOKEN}").text


def test_ui_names_the_hosts_it_answers_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    monkeypatch.setattr(uvicorn.Server, "run", lambda server, sockets=None: None)
    durastate.open(f"sqlite://{tmp_path / 'ui.db'}").close()
    args = ["--url", f"sqlite://{tmp_path / 'ui.db'}", "--host", "0.0.0.0", "--port", "0"]
    result = _ui(*args, "--allow-host", "inspector.lan:8765")
    assert result.exit_code == 0, result.output
    assert "it answers requests for inspector.lan, localhost, 127.0.0.1, ::1" in result.stderr
    assert "add --allow-host NAME" not in result.stderr
