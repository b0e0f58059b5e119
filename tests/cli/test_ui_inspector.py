"""What an operator keeps the inspector open for: alerts, refresh, odd bytes, and the opt-in actions.

Starlette's TestClient over ``create_app`` (the routes, headers and HTML);
the same pages in headless Chromium are in ``test_ui_browser.py``. The store
runs on a ``FakeClock``, so leases expire and items age without waiting.
"""

from __future__ import annotations

import datetime
import html as html_module
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from click.testing import CliRunner
from starlette.testclient import TestClient

import durastate
from durastate.cli._format import table_time
from durastate.cli.ui import create_app
from durastate.cli.ui.alerts import Thresholds
from durastate.testing.clock import FakeClock
from durastate.testing.sample import Sample

from .browser import Node, parse
from .conftest import cli_here

BASE = "http://127.0.0.1:8765"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock) -> Iterator[durastate.Store]:
    with durastate.open(f"sqlite://{tmp_path / 'ui.db'}", clock=clock) as opened:
        yield opened


def client(store: durastate.Store, **options: Any) -> TestClient:
    return TestClient(create_app(store, **options), base_url=BASE, follow_redirects=False)


def html(response: Any) -> Node:
    assert response.status_code == 200, response.text[-800:]
    assert "\x00" not in response.text and "\x1b" not in response.text
    return parse(response.text)


def pre_lines(page: str) -> list[str]:
    """The lines of the page's ``<pre id="value">`` as the browser shows them (tags dropped, entities read)."""
    found = re.search(r'<pre id="value"[^>]*>(.*?)</pre>', page, re.S)
    assert found is not None
    return html_module.unescape(re.sub(r"<[^>]+>", "", found.group(1))).splitlines()


def flagged_rows(page: Node) -> dict[tuple[str, str], set[str]]:
    """``(kind, name) -> flags`` of the overview's queue and lane table."""
    table = page.by_id("backlog")
    rows = [n for n in table.walk() if n.tag == "tr" and "line" in (n.attrs.get("class") or "").split()]
    found = {}
    for row in rows:
        cells = [c for c in row.children if c.tag == "td"]
        found[(cells[0].text(), cells[1].text())] = set((row.attrs.get("data-flags") or "").split())
    return found


def test_overview_flags_dead_letters_stuck_leases_old_items_and_backlogs(
    store: durastate.Store, clock: FakeClock
) -> None:
    q = store.queues
    q.push("calm", [b"fresh"])
    q.push("busy", [b"%d" % i for i in range(5)])
    assert q.claim("busy", lease=10) is not None  # its worker will never answer
    q.push("fragile", [b"job"], max_attempts=1)
    doomed = q.claim("fragile", lease=10)
    assert doomed is not None
    doomed.nack(error="boom")
    events = store.events
    events.append("s1", [{"type": "t", "payload": 1, "lane": "tools"}, {"type": "t", "payload": 2}])
    [first, _] = events.claim_available("s1", "w", ttl_ms=10_000).events
    events.fail_attempt("s1", first.index, first.attempt_count, "tool crashed", 1)
    clock.advance(120)  # the busy lease ran out; everything ready has waited two minutes
    q.push("calm", [b"new"])
    page = html(client(store, thresholds=Thresholds(stale_after=60, backlog_over=3)).get("/"))

    flags = flagged_rows(page)
    assert flags[("queue", "busy")] == {"stuck", "stale", "backlog"}
    assert flags[("queue", "fragile")] == {"dead"}
    assert flags[("queue", "calm")] == {"stale"}  # its oldest item waits 2 min; the new one does not matter
    assert flags[("lane", "tools")] == {"dead"}
    # #2 was claimed with #1 and never answered: its claim ran out two minutes ago.
    assert flags[("lane", "(no lane)")] == {"stuck", "stale"}
    alerts = page.by_id("alerts")
    texts = [" ".join(r) for r in alerts.rows()]
    # Each flag is a word and a sign, not a colour only.
    assert "⚠ DEAD LETTERS queue fragile 1 dead letter" in texts
    assert "⚠ STUCK queue busy 1 lease past the deadline" in texts
    assert "⚠ BACKLOG queue busy 5 items ready" in texts
    assert "⚠ OLD queue busy oldest ready item waiting 2 min" in texts
    assert "⚠ DEAD LETTERS lane tools 1 dead letter" in texts
    assert "⚠ STUCK lane (no lane) 1 claim past the deadline" in texts
    assert page.by_id("alert-count").text() == str(len(texts))
    busy = next(r for r in page.by_id("backlog").rows() if r[1] == "busy")
    assert busy == ["queue", "busy", "5 ⚠", "2 min ⚠", "1 ⚠", "0"]


def test_a_quiet_store_says_nothing_is_flagged(store: durastate.Store) -> None:
    store.queues.push("q", [b"x"])
    page = html(client(store).get("/"))
    assert "nothing flagged" in page.by_id("alerts").text()
    assert flagged_rows(page) == {("queue", "q"): set()}


def test_the_overview_polls_its_alerts_only(store: durastate.Store) -> None:
    browser = client(store, refresh=2.5)
    page = html(browser.get("/"))
    live = page.by_id("live")
    assert (live.attrs["hx-get"], live.attrs["hx-trigger"], live.attrs["hx-swap"]) == (
        "/?part=live",
        "every 2.5s",
        "outerHTML",
    )
    assert page.by_id("pause").attrs["aria-pressed"] == "false"
    fragment = browser.get("/?part=live", headers={"HX-Request": "true"})
    assert fragment.status_code == 200 and "<html" not in fragment.text and 'id="tables"' not in fragment.text
    assert parse(fragment.text).by_id("live").attrs["data-source"] == "poll"
    still = html(client(store, refresh=0).get("/"))
    assert "hx-get" not in still.by_id("live").attrs and not still.find(id="pause")


def test_kv_logs_and_counters_are_shown(store: durastate.Store) -> None:
    for n in range(50):
        store.kv.append(b"run", b"events", b"stream", b"entry %d" % n)
    store.kv.incr(b"run", b"events", b"seen", 50)
    browser = client(store, page_size=20)
    page = html(browser.get("/kv?scope=run&ns=events"))
    assert "no live values" not in page.text()
    assert "no plain values: this namespace holds logs and counters" in page.by_id("kv-rows").text()
    assert page.by_id("kv-logs").rows() == [["stream"]]
    assert page.by_id("kv-counters").rows() == [["seen", "50"]]
    log = html(browser.get("/kv?scope=run&ns=events&log=stream"))
    entries = log.by_id("log-entries").rows()
    assert [r[0] for r in entries] == [str(n) for n in range(1, 21)] and entries[0][2] == "entry 0"
    more = html(browser.get("/kv?scope=run&ns=events&log=stream&entry_after=20"))
    assert more.by_id("log-entries").rows()[0][2] == "entry 20"
    raw = browser.get("/raw/kv?scope=run&ns=events&key=stream&entry=3")
    assert raw.content == b"entry 2" and raw.headers["content-type"] == "application/octet-stream"


def test_a_large_value_is_cut_and_downloadable_whole(store: durastate.Store) -> None:
    big = b"x" * 1_000_000 + b"end"
    store.kv.put(b"s", b"n", b"big", big)
    browser = client(store)
    response = browser.get("/kv?scope=s&ns=n&key=big")
    assert len(response.content) < 40_000  # a 1 MB value makes a few KB of HTML
    page = html(response)
    assert len(page.by_id("value").text()) == 4096
    assert "showing the first 4096 of 1000003 bytes" in page.by_id("truncated").text()
    assert page.by_id("raw").attrs["href"] == "/raw/kv?scope=s&ns=n&key=big"
    raw = browser.get("/raw/kv?scope=s&ns=n&key=big")
    assert raw.content == big
    assert raw.headers["content-type"] == "application/octet-stream"
    assert raw.headers["content-disposition"] == 'attachment; filename="big.bin"'
    assert raw.headers["x-content-type-options"] == "nosniff"
    assert browser.get("/raw/kv?scope=s&ns=n&key=absent").status_code == 404
    hexed = browser.get("/kv?scope=s&ns=n&key=big&view=hex")
    assert len(hexed.content) < 60_000 and len(pre_lines(hexed.text)) == 4096 // 16


def test_binary_opens_as_hex_rows_and_nul_never_reaches_the_page(store: durastate.Store) -> None:
    value = b"\x00\x01hello \x1b[31mred\x1b[0m " + bytes(range(0x80, 0x90))
    store.kv.put(b"s", b"n", b"bin", value)
    store.kv.put(b"s", b"n", b"text", "héllo\tworld\n".encode())
    store.kv.put(b"s", b"n", b"k\x00ey", b"v")
    browser = client(store)
    response = browser.get("/kv?scope=s&ns=n&key=bin")
    assert html(response).by_id("value").attrs["class"] == "hex"
    assert pre_lines(response.text) == [
        "00000000  00 01 68 65 6c 6c 6f 20  1b 5b 33 31 6d 72 65 64  |..hello .[31mred|",
        "00000010  1b 5b 30 6d 20 80 81 82  83 84 85 86 87 88 89 8a  |.[0m ...........|",
        "00000020  8b 8c 8d 8e 8f                                    |.....|",
    ]
    text = html(browser.get("/kv?scope=s&ns=n&key=text"))
    assert text.by_id("value").attrs["class"] == "wrap" and "héllo" in text.by_id("value").text()
    forced = browser.get("/kv?scope=s&ns=n&key=bin&view=text")  # asked for text: control bytes as escapes
    assert "\\x00\\x01hello \\x1b[31mred" in html(forced).by_id("value").text()
    store.kv.put(b"s", b"n", b"trojan", "ok\u202eevil\u200b".encode())  # an override, a zero width space
    trojan = browser.get("/kv?scope=s&ns=n&key=trojan")
    assert "\u202e" not in trojan.text and "\u200b" not in trojan.text
    assert html(trojan).by_id("value").text() == "ok\\u202eevil\\u200b"  # shown as the CLI shows it
    listing = browser.get("/kv?scope=s&ns=n")
    cells = html(listing).by_id("kv-rows").rows()
    assert ["hex:6b006579", "v"] in cells  # the key with a NUL, shown the CLI's way
    assert any(c[0] == "bin" and c[1].startswith("hex 00 01 68") for c in cells)


def test_dead_letters_keep_their_traceback_lines_and_payloads_download(store: durastate.Store) -> None:
    trace = 'Traceback (most recent call last):\n  File "job.py", line 3\nValueError: bad \x1b byte <b>'
    store.queues.push("jobs", [b"\x00binary payload"], max_attempts=1)
    claim = store.queues.claim("jobs", lease=10)
    assert claim is not None
    claim.nack(error=trace)
    browser = client(store)
    response = browser.get("/queues/jobs")
    assert "byte &lt;b&gt;" in response.text and "byte <b>" not in response.text
    page = html(response)
    [pre] = [n for n in page.walk() if n.tag == "pre" and "trace" in (n.attrs.get("class") or "")]
    assert "".join(pre.texts).splitlines() == [
        "Traceback (most recent call last):",
        '  File "job.py", line 3',
        "ValueError: bad \\x1b byte <b>",
    ]
    [dead] = store.queues.dead_letters("jobs")
    raw = browser.get(f"/raw/queues/jobs?id={dead.id}")
    assert raw.content == b"\x00binary payload" and raw.headers["content-type"] == "application/octet-stream"
    assert browser.get(f"/raw/queues/jobs?id={dead.id + 1}").status_code == 404


def test_queue_items_download_by_their_cursor(store: durastate.Store) -> None:
    store.queues.push("jobs", [b"one", b"two"])
    browser = client(store)
    page = browser.get("/queues/jobs").text
    links = re.findall(r'href="(/raw/queues/jobs\?id=\d+&cursor=[^"]+)"', page)
    assert [browser.get(link).content for link in links] == [b"one", b"two"]
    store.queues.pop("jobs")
    assert browser.get(links[0]).status_code == 404  # taken since


def test_event_timelines_carry_zoned_timestamps(store: durastate.Store, clock: FakeClock) -> None:
    store.events.append("chat", [{"type": "user.message", "payload": {"text": "hi"}}])
    page = html(client(store).get("/events/chat"))
    [stamp, *_] = [n for n in page.by_id("timeline").walk() if n.tag == "time"]
    moment = datetime.datetime.fromisoformat(stamp.attrs["datetime"] or "")
    assert moment.tzinfo is not None
    assert moment.timestamp() == pytest.approx(clock(), abs=0.001)
    assert stamp.text() == table_time(clock() * 1000)  # as the command line's tables show times: zone included
    assert stamp.text().endswith(moment.isoformat()[-6:])


def test_without_allow_writes_there_is_nothing_to_post_to(store: durastate.Store) -> None:
    store.queues.push("jobs", [b"x"], max_attempts=1)
    claim = store.queues.claim("jobs", lease=1)
    assert claim is not None
    claim.nack(error="e")
    browser = client(store)
    for path in ("/actions/queue-redrive", "/actions/queue-purge", "/actions/events-redrive", "/actions/events-purge"):
        assert browser.post(path, data={"target": "jobs"}).status_code == 404
    assert browser.get("/confirm?action=queue-purge&target=jobs").status_code == 404
    assert browser.post("/queues/jobs").status_code == 405
    page = browser.get("/queues/jobs").text
    assert "/confirm" not in page and "purge" not in page and "read-only" in page
    assert store.queues.stats("jobs").dead == 1


def _confirm(browser: TestClient, query: str) -> dict[str, str]:
    page = html(browser.get("/confirm?" + query))
    form = page.by_id("confirm-form")
    fields = {n.attrs["name"] or "": n.attrs["value"] or "" for n in form.walk() if n.tag == "input"}
    assert form.attrs["method"] == "post"
    return fields


def _dead(store: durastate.Store, queue: str, count: int) -> list[int]:
    store.queues.push(queue, [b"%d" % i for i in range(count)], max_attempts=1)
    for _ in range(count):
        claim = store.queues.claim(queue, lease=1)
        assert claim is not None
        claim.nack(error="boom")
    return [d.id for d in store.queues.dead_letters(queue)]


def tampered(token: str) -> str:
    """``token`` with its last hex digit changed (to another digit: replacing it with "0" kept a token ending in 0)."""
    return token[:-1] + ("1" if token[-1] == "0" else "0")


def test_redrive_and_purge_are_confirmed_and_refuse_cross_site_posts(store: durastate.Store) -> None:
    ids = _dead(store, "jobs", 3)
    browser = client(store, allow_writes=True)
    assert "/confirm?action=queue-purge&target=jobs" in browser.get("/queues/jobs").text
    fields = _confirm(browser, "action=queue-redrive&target=jobs")
    assert fields["target"] == "jobs" and fields["id"] == "" and "." in fields["csrf"]
    assert "moves 3 dead letters back" in browser.get("/confirm?action=queue-redrive&target=jobs").text

    refused = [
        browser.post("/actions/queue-redrive", data={**fields, "csrf": ""}),
        browser.post("/actions/queue-redrive", data={**fields, "csrf": tampered(fields["csrf"])}),
        browser.post("/actions/queue-redrive", data=fields, headers={"Origin": "http://attacker.example"}),
        browser.post("/actions/queue-redrive", data=fields, headers={"Origin": "null"}),
        browser.post("/actions/queue-redrive", data=fields, headers={"Sec-Fetch-Site": "cross-site"}),
        browser.post("/actions/queue-purge", data=fields),  # a token for redrive does not purge
        browser.post("/actions/queue-redrive", data={**fields, "target": "other"}),  # nor act elsewhere
        browser.post("/actions/queue-redrive", data={**fields, "id": str(ids[0])}),
    ]
    assert [r.status_code for r in refused] == [403] * len(refused)
    assert store.queues.stats("jobs").dead == 3  # nothing was done
    assert browser.get("/actions/queue-redrive").status_code == 405  # POST only

    one = _confirm(browser, f"action=queue-purge&target=jobs&id={ids[0]}")
    done = browser.post("/actions/queue-purge", data=one, headers={"Origin": BASE, "Sec-Fetch-Site": "same-origin"})
    assert done.status_code == 303 and done.headers["location"] == "/queues/jobs?done=purged%201"
    assert [d.id for d in store.queues.dead_letters("jobs")] == ids[1:]
    done = browser.post("/actions/queue-redrive", data=fields)
    assert done.headers["location"] == "/queues/jobs?done=redrove%202"
    assert store.queues.stats("jobs") == durastate.queues.QueueStats(ready=2, in_flight=0, delayed=0, dead=0)
    assert "✓ redrove 2" in browser.get(done.headers["location"]).text
    gone = browser.get(f"/confirm?action=queue-purge&target=jobs&id={ids[0]}")
    assert "Nothing to do" in gone.text and "disabled" in gone.text


def test_event_dead_letters_are_redriven_and_purged(store: durastate.Store) -> None:
    store.events.append("s", [{"type": "t", "payload": 1}, {"type": "t", "payload": 2}])
    for event in store.events.claim_available("s", "w", ttl_ms=1000).events:
        store.events.fail_attempt("s", event.index, event.attempt_count, "boom", 1)
    browser = client(store, allow_writes=True)
    assert [r[1] for r in html(browser.get("/dead-letters/events")).by_id("dead-events").rows()] == ["1", "2"]
    assert "/confirm?action=events-redrive&target=s&id=2" in browser.get("/events/s").text
    fields = _confirm(browser, "action=events-redrive&target=s&id=2")
    assert browser.post("/actions/events-redrive", data=fields).headers["location"] == "/events/s?done=redrove%201"
    assert [e.index for e in store.events.dead_letters("s")] == [1]
    assert browser.post("/actions/events-purge", data=fields).status_code == 403  # that token was for a redrive
    assert "/confirm?action=events-purge&target=s&id=1" in browser.get("/events/s").text
    purge = _confirm(browser, "action=events-purge&target=s&id=1")
    assert browser.post("/actions/events-purge", data=purge).headers["location"] == "/events/s?done=purged%201"
    assert store.events.dead_letters("s") == []
    purged = store.events.get("s", 1)
    assert purged is not None and purged.processed_at is not None and purged.processed_by_attempt is None


def test_a_token_guarded_inspector_binds_csrf_to_its_token(store: durastate.Store) -> None:
    _dead(store, "jobs", 1)
    token = "s3cret-token-of-24-chars"
    browser = client(store, allow_writes=True, token=token)
    browser.headers["Authorization"] = f"Bearer {token}"
    fields = _confirm(browser, "action=queue-redrive&target=jobs")
    other = client(store, allow_writes=True, token="another-token-of-24-chars")
    other.headers["Authorization"] = "Bearer another-token-of-24-chars"
    assert other.post("/actions/queue-redrive", data=fields).status_code == 403
    assert browser.post("/actions/queue-redrive", data=fields).status_code == 303


@pytest.mark.parametrize("writes", [False, True])
def test_the_ui_command_opens_read_only_unless_writes_are_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writes: bool
) -> None:
    import uvicorn

    import durastate.cli.ui as ui_package
    from durastate.cli.app import cli

    url = f"sqlite://{tmp_path / 'ui.db'}"
    durastate.open(url).close()
    seen: dict[str, Any] = {}

    def fake_create_app(store: durastate.Store, **options: Any) -> object:
        seen.update(read_only=store.engine.read_only, **options)
        return object()

    monkeypatch.setattr(ui_package, "create_app", fake_create_app)
    # Serve nothing, whichever uvicorn entry the command uses.
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: None)
    monkeypatch.setattr(uvicorn.Server, "run", lambda server, sockets=None: None)
    args = ["ui", "--url", url, "--port", "0", "--stale-after", "30", "--backlog-over", "7", "--refresh", "0"]
    result = CliRunner().invoke(cli, args + (["--allow-writes"] if writes else []))
    assert result.exit_code == 0, result.output
    assert seen["read_only"] is not writes and seen["allow_writes"] is writes
    assert seen["thresholds"] == Thresholds(stale_after=30, backlog_over=7) and seen["refresh"] == 0
    assert ("redrive and purge of dead letters allowed" if writes else "read-only") in result.output


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"page_size": 0}, "page_size"),
        ({"refresh": -1}, "refresh"),
        ({"refresh": True}, "refresh"),
        ({"thresholds": Thresholds(stale_after=0)}, "stale_after"),
        ({"thresholds": Thresholds(backlog_over=-1)}, "backlog_over"),
        ({"thresholds": {"stale_after": 1}}, "thresholds"),
        ({"allow_writes": "yes"}, "allow_writes"),
    ],
)
def test_create_app_refuses_bad_options(store: durastate.Store, options: dict[str, Any], message: str) -> None:
    with pytest.raises(durastate.InvalidRequest, match=message):
        create_app(store, **options)


def test_the_overview_shows_the_facts_as_durastate_info_does(filled: tuple[str, Sample]) -> None:
    # docs/inspector.md says the overview's facts are `durastate info`'s: the same names (synchronous NORMAL, not
    # 1) and numbers (1,236,992 (1.2 MiB), not 1.2 MiB (1236992)).
    url, _ = filled
    info = cli_here(url, "info")
    assert info.returncode == 0, info.stderr
    printed = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in info.stdout.decode().splitlines() if "  " in line)
    with durastate.open(url, read_only=True) as opened:
        page = html(client(opened).get("/"))
    shown = {}
    for row in (n for n in page.by_id("health").walk() if n.tag == "tr"):
        [key] = [c.text() for c in row.children if c.tag == "th"]
        [value] = [c.text() for c in row.children if c.tag == "td"]
        shown[key] = value
    del shown["integrity"]  # by design: a page never reads the whole file (`durastate doctor` does)
    # The whole database's size on PostgreSQL moves with whatever else runs on the server (the suite's other
    # workers) between the two reads: its form is compared, not its value.
    for volatile in ("database_bytes",):
        for facts in (shown, printed):
            if volatile in facts:
                assert re.fullmatch(r"[\d,]+ \(.+\)", facts[volatile]), facts
                facts[volatile] = "(size)"
    assert shown == {key: value for key, value in printed.items() if key in shown}
    assert "schema" in shown and len(shown) >= 5
    if url.startswith("sqlite"):
        assert shown["synchronous"] in ("OFF", "NORMAL", "FULL", "EXTRA"), shown
        assert re.fullmatch(r"[\d,]+ \(.+\)", shown["file_bytes"]), shown
