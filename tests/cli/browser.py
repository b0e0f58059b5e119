"""Headless Chromium for the inspector tests: find (or install) it, dump DOMs, take screenshots.

``find_chromium()`` returns the binary, installing Debian's ``chromium``
package when it is missing and we are root; otherwise it returns ``None``
and the reason. Each run uses a fresh ``--user-data-dir`` and the flags
that keep Chromium off the network (no component updates, sync, QUIC).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from durastate.testing.debian import ensure_package

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def find_chromium() -> tuple[str | None, str]:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found, ""
    return ensure_package("chromium", "chromium")


def _run(binary: str, *args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="durastate-chromium-") as profile:
        return subprocess.run(
            [binary, *FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


def dump_dom(binary: str, url: str, budget_ms: int | None = None) -> str:
    """The DOM after load; with ``budget_ms``, after that much virtual time (timers, htmx polling) has run."""
    extra = () if budget_ms is None else (f"--virtual-time-budget={budget_ms}",)
    done = _run(binary, *extra, "--dump-dom", url)
    assert done.returncode == 0 and "<html" in done.stdout, f"chromium --dump-dom {url}: {done.stderr[-500:]}"
    return done.stdout


def screenshot(binary: str, url: str, dest: Path, size: str = "1280,860") -> None:
    done = _run(binary, f"--screenshot={dest}", f"--window-size={size}", url)
    assert done.returncode == 0 and dest.exists(), f"chromium --screenshot {url}: {done.stderr[-500:]}"


class Node:
    def __init__(self, tag: str, attrs: dict[str, str | None], parent: Node | None) -> None:
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Node] = []
        self.texts: list[str] = []

    def text(self) -> str:
        return " ".join(" ".join([*self.texts, *(c.text() for c in self.children)]).split())

    def walk(self) -> Any:
        yield self
        for c in self.children:
            yield from c.walk()

    def find(self, **attrs: str) -> list[Node]:
        return [n for n in self.walk() if all(n.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())]

    def by_id(self, ident: str) -> Node:
        [node] = self.find(id=ident)
        return node

    def by_class(self, cls: str) -> list[Node]:
        return [n for n in self.walk() if cls in (n.attrs.get("class") or "").split()]

    def rows(self) -> list[list[str]]:
        """The cells of a table's body rows (header row excluded)."""
        rows = [n for n in self.walk() if n.tag == "tr"]
        return [[c.text() for c in r.children if c.tag == "td"] for r in rows if any(c.tag == "td" for c in r.children)]


VOID = {"meta", "link", "br", "img", "input", "hr", "source"}


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.root = Node("#root", {}, None)
        self.at = self.root

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, dict(attrs), self.at)
        self.at.children.append(node)
        if tag not in VOID:
            self.at = node

    def handle_endtag(self, tag: str) -> None:
        node: Node | None = self.at
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.at = node.parent

    def handle_data(self, data: str) -> None:
        if self.at.tag not in ("script", "style"):
            self.at.texts.append(data)


def parse(html: str) -> Node:
    builder = _Builder()
    builder.feed(html)
    return builder.root
