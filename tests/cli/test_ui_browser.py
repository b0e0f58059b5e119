"""The inspector in a real browser: every page, loaded by headless Chromium.

``durastate ui`` runs as a subprocess (the real entry point) over a store
filled by ``durastate.testing.sample.fill``, on each shareable engine;
Chromium's ``--dump-dom`` gives the rendered DOM and the test checks what
matters on each page (rows, counts, states, the fork tree) against the
sample's own record of what it wrote. ``test_every_page_in_chromium``
loads every page in Chromium on SQLite; on PostgreSQL it checks the same
things on the pages as served (the pages are rendered by the server, the
same for both engines in the browser; a Chromium start is about 2 s of CPU
a page), and draws one in Chromium. Screenshots are taken of each page;
with ``DURASTATE_UPDATE_SCREENSHOTS=1`` (SQLite run) they replace the ones
under ``docs/screenshots/``.

When Chromium is missing and cannot be installed (not root), the tests
skip, and the reason is repeated loudly in the terminal summary.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import http.server
import io
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

import durastate
from durastate.cli import dump
from durastate.testing.sample import Sample, fill

from .browser import dump_dom, find_chromium, parse, screenshot

DOCS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
_skip_reason: list[str] = []


@pytest.fixture(scope="module")
def chromium() -> str:
    binary, reason = find_chromium()
    if binary is None:
        _skip_reason[:] = [reason]
        pytest.skip(f"BROWSER TESTS SKIPPED: {reason}")
    return binary


def pytest_terminal_summary(terminalreporter: object) -> None:  # pragma: no cover - reporting only
    if _skip_reason:
        terminalreporter.write_sep("!", "inspector browser tests were SKIPPED", red=True, bold=True)  # type: ignore[attr-defined]
        terminalreporter.write_line(_skip_reason[0])  # type: ignore[attr-defined]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve(url: str, *args: str) -> Iterator[str]:
    """``durastate ui`` over ``url`` with ``args`` on a free port, until the block ends; yields its base URL."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DURASTATE_")}
    server = subprocess.Popen(
        [sys.executable, "-m", "durastate.cli", "ui", "--url", url, "--port", str(port), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:  # wait until the server answers (a readiness probe, not a fixed sleep)
            try:
                with urllib.request.urlopen(base + "/static/htmx.min.js", timeout=5) as r:
                    assert r.status == 200
                break
            except (urllib.error.URLError, ConnectionError):
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(
                        f"durastate ui did not start: {server.stdout.read() if server.stdout else ''}"
                    ) from None
                time.sleep(0.1)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=30)


def served(url: str) -> str:
    """The page at ``url`` as the inspector serves it."""
    with urllib.request.urlopen(url, timeout=30) as r:
        assert r.status == 200, url
        return str(r.read().decode())


@pytest.fixture
def inspector(filled: tuple[str, Sample]) -> Iterator[str]:
    with serve(filled[0], "--page-size", "3") as base:
        yield base


def pages(sample: Sample, second_page_cursor: str) -> dict[str, str]:
    fork = next(c for c, p in sample.conversations.items() if p is not None)
    return {
        "overview": "/",
        "kv": "/kv?scope=run-1&ns=cfg&key=params&view=json",
        "kv-hex": "/kv?scope=run-1&ns=blobs&key=" + quote("hex:00ff62696e"),
        "kv-log": "/kv?scope=run-1&ns=log&log=stream",
        "queues": "/queues",
        "queue": "/queues/emails",
        "queue-leased": "/queues/emails?after=" + quote(second_page_cursor),
        "queue-dead": "/queues/fragile",
        "events": "/events",
        "session": "/events/chat-1",
        "dead-events": "/dead-letters/events",
        "documents": "/documents",
        "document": "/documents/" + quote("runs/1"),
        "records": "/records",
        "conversation": f"/records/conversations/{fork}",
        "record-document": f"/records/documents/{sample.record_document}",
        "presence": "/presence",
        "presence-ns": "/presence/room-1",
    }


@pytest.mark.slow  # about a minute: early in make test's queue, so it never runs alone at the end
def test_every_page_in_chromium(chromium: str, inspector: str, filled: tuple[str, Sample], tmp_path: Path) -> None:
    url, sample = filled
    with durastate.open(url) as store:
        before = io.BytesIO()
        dump.export_store(store, before)
        cursor = store.queues.peek("emails", limit=3)[-1].cursor
    # Chromium's DOM on SQLite; on PostgreSQL the page as served (the module's docstring says why).
    load = functools.partial(dump_dom, chromium) if url.startswith("sqlite") else served
    doms = {name: parse(load(inspector + path)) for name, path in pages(sample, cursor).items()}

    overview = doms["overview"]
    facet_rows = {r[0]: int(r[1]) for r in overview.by_id("facets").rows()}
    assert facet_rows["kv"] == len(sample.kv_values) + 2 + 1  # values + log entries + counter
    facts = overview.by_id("health").text()
    assert ("engine postgresql" if url.startswith("postgresql") else "engine sqlite") in facts
    if not url.startswith("postgresql"):
        assert "not checked" in facts  # a page load never reads the whole file (doctor does)

    # The sample's dead letters are flagged, as words and signs (not colour alone).
    alerts = [" ".join(r) for r in overview.by_id("alerts").rows()]
    assert "⚠ DEAD LETTERS queue fragile 1 dead letter" in alerts
    assert "⚠ DEAD LETTERS lane (no lane) 1 dead letter" in alerts
    lines = {(r[0], r[1]): r[2:] for r in overview.by_id("backlog").rows()}
    assert lines[("queue", "emails")][0] == "3" and lines[("queue", "fragile")][3] == "1 ⚠"
    assert overview.by_id("live").attrs["hx-trigger"] == "every 5s"

    kv = doms["kv"]
    tree = kv.by_id("scope-tree").text()
    # Paged at 3: the first three scopes, and a link to more.
    assert all(s.decode() in tree for s in sample.kv_scopes[:3]) and "more scopes" in tree
    # run-1 is open: its first page of namespaces (values, logs and counters alike) and a pager.
    assert "blobs cfg log more namespaces" in tree
    assert [r[0] for r in kv.by_id("kv-rows").rows()] == ["model", "params"]
    assert '"temperature": 0.2' in kv.by_id("value").text()

    hexed = doms["kv-hex"].by_id("value")
    assert hexed.attrs["class"] == "hex"  # binary opens as hex by itself
    # One row: offset, 16 bytes in two groups of 8, the ASCII column (the parser reads spans apart).
    row = [n.text() for n in hexed.children] + [hexed.text()]
    assert row[:2] == ["00000000", "|................|"] and "00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f" in row[2]
    entries = doms["kv-log"].by_id("log-entries").rows()
    assert [(r[2], r[3]) for r in entries] == [("started", "raw"), ("step-1", "raw")]
    assert int(entries[0][0]) < int(entries[1][0])  # ordinals, in order
    assert doms["kv-log"].by_id("kv-logs").rows() == [["stream"]]

    queues = {r[0]: [int(x.rstrip(" ⚠")) for x in r[1:]] for r in doms["queues"].by_id("queues").rows()}
    assert [r[4] for r in doms["queues"].by_id("queues").rows()] == ["0", "1 ⚠"]  # dead letters flagged
    assert queues == {q: [c["ready"], c["in_flight"], c["delayed"], c["dead"]] for q, c in sample.queues.items()}
    items = doms["queue"].by_id("items").rows()
    assert [r[1] for r in items] == ["ready", "ready", "ready"]  # page of 3, in delivery order
    leased = doms["queue-leased"].by_id("items").rows()
    assert [r[1] for r in leased] == ["leased", "delayed"]  # the second page
    assert "s left" in leased[0][3]  # the lease countdown
    assert "next items" in doms["queue"].text()
    [dead] = doms["queue-dead"].by_id("dead").rows()
    assert "smtp timeout" in dead[2]

    sessions = [r[0] for r in doms["events"].by_id("sessions").rows()]
    assert sessions == sample.sessions
    timeline = {r[1]: r[4] for r in doms["session"].by_id("timeline").rows()}
    assert timeline == {"m1": "processed", "m2": "pending", "t1": "dead ⚠"}  # the first page of 3; flagged
    assert "search backend down" in doms["session"].by_id("timeline").text()
    assert doms["session"].by_id("snapshots").rows()[0][0] == "transcript"
    stamps = [n for n in doms["session"].by_id("timeline").walk() if n.tag == "time"]
    assert stamps and all(datetime.datetime.fromisoformat(n.attrs["datetime"] or "").tzinfo for n in stamps)
    [dead_event] = doms["dead-events"].by_id("dead-events").rows()
    assert dead_event[:2] == ["chat-1", "3"] and "search backend down" in dead_event[7]

    listed = doms["documents"].by_id("documents").rows()
    assert {r[0]: int(r[1]) for r in listed} == sample.documents
    # The filled store records history: every written document has its revisions, the backup none.
    writes = sample.document_writes
    history_column = {r[0]: r[3] for r in listed}
    assert history_column == {
        key: (f"{len(writes[key])} revision{'' if len(writes[key]) == 1 else 's'}" if key in writes else "none")
        for key in sample.documents
    }
    document = doms["document"]
    assert document.by_id("revision").text() == f"revision {sample.documents['runs/1']}"
    assert '"state": "running"' in document.by_id("body").text()
    count = len(writes["runs/1"])
    assert document.by_id("recorded").text() == f"{count} recorded, 1-{count}"
    shown = document.by_class("revision")  # the page size (3) holds them all, newest first
    assert [int(r.attrs["data-revision"] or 0) for r in shown] == list(range(count, 0, -1))
    assert '+ "worker": "worker-b"' in shown[0].text() and '- "step": 3' in shown[0].text()
    assert "first recorded" in shown[-1].text()
    older = parse(load(inspector + "/documents/" + quote("runs/1") + f"?before={count}"))
    assert [int(r.attrs["data-revision"] or 0) for r in older.by_class("revision")] == list(range(count - 1, 0, -1))
    cleared = parse(load(inspector + "/documents/" + quote("scratch.bak")))
    assert cleared.by_id("recorded").text() == "none recorded" and "Retention(document_history=N)" in cleared.text()

    fork_tree = doms["records"].by_id("fork-tree")
    for conv, parent in sample.conversations.items():
        [node] = fork_tree.find(data_id=str(conv))
        holder = node.parent
        while holder is not None and holder.attrs.get("data-id") is None and holder is not fork_tree:
            holder = holder.parent
        expected = str(parent) if parent is not None else None
        assert (holder.attrs.get("data-id") if holder is not None else None) == expected
    fork = next(c for c, p in sample.conversations.items() if p is not None)
    entries = {int(r[0]) for r in doms["conversation"].by_id("entries").rows()}
    assert entries == {*sample.entries[fork], sample.entries[sample.conversations[fork]][0]}  # type: ignore[index]

    revisions = doms["record-document"].by_class("revision")
    assert [int(r.attrs["data-seq"] or 0) for r in revisions] == sample.record_document_seqs
    assert '+ "city": "Lisbon"' in revisions[1].text()

    assert [r[0] for r in doms["presence"].by_id("namespaces").rows()] == list(sample.presence)
    assert sorted({r[0] for r in doms["presence-ns"].by_id("fields").rows()}) == sample.presence["room-1"]

    with durastate.open(url) as store:  # browsing wrote nothing
        after = io.BytesIO()
        dump.export_store(store, after)
    assert after.getvalue().splitlines()[1:] == before.getvalue().splitlines()[1:]

    update = os.environ.get("DURASTATE_UPDATE_SCREENSHOTS") == "1" and url.startswith("sqlite")
    target = DOCS if update else tmp_path
    target.mkdir(parents=True, exist_ok=True)
    # Every page's DOM was checked above; a picture of each is for the docs (DURASTATE_UPDATE_SCREENSHOTS=1).
    # Otherwise one page is drawn, to show the page renders (a Chromium start is about 2 s of CPU a page).
    shown = pages(sample, cursor) if update else {"overview": "/"}
    for name, path in shown.items():
        shot = target / f"{name}.png"
        screenshot(chromium, inspector + path, shot)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_endpoint_writes(inspector: str, filled: tuple[str, Sample]) -> None:
    _, sample = filled
    for path in pages(sample, "0:0").values():
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            request = urllib.request.Request(inspector + path, data=b"x", method=method)
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=10)
            assert refused.value.code == 405, (method, path)
    # No --allow-writes: no action routes.
    for action in ("queue-redrive", "queue-purge", "events-redrive", "events-purge"):
        request = urllib.request.Request(inspector + "/actions/" + action, data=b"target=fragile", method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 404, action


@pytest.mark.slow
def test_overview_refreshes_itself_and_pauses_in_chromium(
    chromium: str, filled: tuple[str, Sample], tmp_path: Path
) -> None:
    """htmx polls the alerts (the swapped-in part says it came from a poll); opened paused, it does not."""
    url, _ = filled
    with serve(url, "--refresh", "1") as base:
        polled = parse(dump_dom(chromium, base + "/", budget_ms=5000))
        assert polled.by_id("live").attrs["data-source"] == "poll"
        assert "DEAD LETTERS" in polled.by_id("alerts").text()  # the polled part is the whole alerts part
        paused = parse(dump_dom(chromium, base + "/#paused", budget_ms=5000))
        assert paused.by_id("live").attrs["data-source"] == "page"
        assert paused.by_id("pause").attrs["aria-pressed"] == "true" and "resume" in paused.by_id("pause").text()
        assert paused.by_id("refresh-note").text() == "refresh paused"


@pytest.mark.slow
def test_actions_are_offered_and_confirmed_in_chromium(
    chromium: str, filled: tuple[str, Sample], tmp_path: Path
) -> None:
    """With --allow-writes the dead letters carry redrive/purge links, each to a confirm page with a form."""
    url, _ = filled
    with serve(url, "--allow-writes", "--page-size", "3") as base:
        queue = parse(dump_dom(chromium, base + "/queues/fragile"))
        assert queue.by_id("purge-all").attrs["href"] == "/confirm?action=queue-purge&target=fragile"
        assert "writes allowed" in queue.text()
        confirm = parse(dump_dom(chromium, base + "/confirm?action=queue-purge&target=fragile"))
        assert "deletes 1 dead letter for good" in confirm.by_id("what").text()
        form = confirm.by_id("confirm-form")
        assert (form.attrs["method"], form.attrs["action"]) == ("post", "/actions/queue-purge")
        update = os.environ.get("DURASTATE_UPDATE_SCREENSHOTS") == "1" and url.startswith("sqlite")
        target = DOCS if update else tmp_path
        shots = {"confirm": "/confirm?action=queue-purge&target=fragile", "queue-writes": "/queues/fragile"}
        for name, path in shots.items() if update else ():  # the DOMs above are the test; pictures for the docs
            shot = target / f"{name}.png"
            screenshot(chromium, base + path, shot)
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with durastate.open(url) as store:
        assert store.queues.stats("fragile").dead == 1  # looking wrote nothing


@pytest.mark.slow
def test_a_cross_site_form_cannot_act_even_with_a_leaked_token(
    chromium: str, filled: tuple[str, Sample], tmp_path: Path
) -> None:
    """A page on another origin auto-submits the purge form, with a valid CSRF token copied from a confirm page:
    Chromium sends its Origin and Sec-Fetch-Site, the inspector refuses (403) and nothing is purged."""
    url, _ = filled
    with serve(url, "--allow-writes") as base:
        with urllib.request.urlopen(base + "/confirm?action=queue-purge&target=fragile", timeout=10) as r:
            confirm = parse(r.read().decode())
        fields = {n.attrs["name"]: n.attrs["value"] for n in confirm.by_id("confirm-form").walk() if n.tag == "input"}
        inputs = "".join(f'<input type="hidden" name="{k}" value="{v}">' for k, v in fields.items())
        (tmp_path / "attack.html").write_text(
            f'<!doctype html><html><body><form method="post" action="{base}/actions/queue-purge">{inputs}</form>'
            "<script>document.forms[0].submit()</script></body></html>"
        )
        attacker = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
        )
        thread = threading.Thread(target=attacker.serve_forever, daemon=True)
        thread.start()
        try:
            landed = dump_dom(chromium, f"http://127.0.0.1:{attacker.server_address[1]}/attack.html", budget_ms=3000)
        finally:
            attacker.shutdown()
            thread.join(timeout=10)
    assert "refused: a cross-site request" in landed  # the form was posted, and answered with the refusal
    with durastate.open(url) as store:
        assert store.queues.stats("fragile").dead == 1


def test_missing_things_are_404_and_bad_input_400(inspector: str) -> None:
    for path, code in (
        ("/documents/absent", 404),
        ("/records/conversations/999999", 404),
        ("/nowhere", 404),
        ("/queues/", 400),  # an empty queue name is refused by the facet
        ("/kv?scope=hex:zz", 400),
    ):
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(inspector + path, timeout=10)
        assert answer.value.code == code, path


def test_scope_tree_fragment_for_htmx_and_escaped_values(inspector: str, filled: tuple[str, Sample]) -> None:
    url, _ = filled
    with durastate.open(url) as store:
        store.kv.put(b"xss", b"ns", b"<b>key</b>", b"<script>alert(1)</script>")
    request = urllib.request.Request(inspector + "/kv?scope=run-1&part=tree", headers={"HX-Request": "true"})
    with urllib.request.urlopen(request, timeout=10) as r:
        fragment = r.read().decode()
    assert "<html" not in fragment and "ns=cfg" in fragment  # just the namespace list, swapped in place
    key = quote("<b>key</b>")
    with urllib.request.urlopen(inspector + f"/kv?scope=xss&ns=ns&key={key}", timeout=10) as r:
        page = r.read().decode()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<b>key</b>" not in page


def test_fill_is_what_the_pages_expect(filled: tuple[str, Sample]) -> None:
    # Guards the expectations above: the sample wrote the states the pages are checked for.
    url, sample = filled
    with durastate.open(url) as store:
        assert store.queues.stats("emails").in_flight == 1
        assert [e.id for e in store.events.read("chat-1")] == ["m1", "m2", "t1", "r1"]
        assert fill.__module__ == "durastate.testing.sample"
        assert len(store.records.document_revisions(sample.record_document)) == len(sample.record_document_seqs)
