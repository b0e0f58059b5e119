"""``durastate maintain`` runs ``store.maintain()`` with the policy its flags describe.

On each shareable engine: ``maintain`` runs the command in this process
(``conftest.cli_here``, the bytes and exit code of a real run), the plain
output and the refused flags in a subprocess (the console script's code path).
The data is written by a store whose clock runs an hour behind, so to the
command (on the real clock) it is an hour old: expired, dead or settled
long ago, without waiting.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

import durastate
from durastate.cli._common import Progress
from durastate.engines.base import READ, WRITE
from durastate.testing.conformance.records import (
    base,
    change,
    conv_scope,
    conversation,
    create,
    delta,
    doc_record,
    set_op,
)

from .conftest import cli_here, run_cli

HOUR = 3600.0


def an_hour_ago() -> Callable[[], float]:
    return lambda: time.time() - HOUR


def maintain(url: str, *flags: str) -> dict[str, Any]:
    done = cli_here(url, "maintain", *flags, "--json")
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_expired_rows_go_in_bounded_resumable_runs(shared_url: str) -> None:
    with durastate.open(shared_url, clock=an_hour_ago()) as store:
        store.kv.put_many(b"cache", b"http", [(b"%03d" % i, b"v") for i in range(50)], ttl=60)
        store.kv.put(b"cache", b"http", b"keep", b"v")
        now_ms = int((time.time() - HOUR) * 1000)
        store.presence.set("room", "alice", {"a": 1, "b": 2}, at_ms=now_ms, seen=1, ttl_ms=1_000)
        store.presence.set("room", "bob", {"c": 3}, at_ms=now_ms, seen=1, ttl_ms=10 * 3_600_000)
    first = maintain(shared_url, "--max-rows", "20")
    assert (first["expired_values"], first["total"], first["finished"]) == (20, 20, False)
    second = maintain(shared_url)  # resumes: the rest, then the presence sweep
    assert (second["expired_values"], second["expired_presence"], second["finished"]) == (30, 2, True)
    third = maintain(shared_url)
    assert third["expired_values"] == third["expired_presence"] == 0
    assert "bytes_returned" in second  # the CLI passes maintain()'s report on (test_pain_space_and_code: the space)
    with durastate.open(shared_url) as store:
        assert [k for k, _ in store.kv.scan(b"cache", b"http")] == [b"keep"]
        assert [p.participant for p in store.presence.peek("room")] == ["bob"]


def test_each_flag_turns_on_its_retention_rule(shared_url: str) -> None:
    history = durastate.Retention(document_history=10)
    with durastate.open(shared_url, clock=an_hour_ago(), retention=history) as store:
        store.queues.push("jobs", [b"old"], max_attempts=1)
        claim = store.queues.claim("jobs", lease=10)
        assert claim is not None
        claim.nack(error="x")
        store.events.append("s", [{"id": f"e{i}", "type": "t", "payload": {}} for i in range(4)])
        while claimed := store.events.claim_available("s", "w", ttl_ms=60_000, limit=10).events:
            for event in claimed:
                store.events.complete_attempt("s", event.index, event.attempt_count)
        store.events.put_snapshot("s", "r", 3, {"n": 3})
        for i in range(3):
            store.kv.append(b"run", b"audit", b"log", b"line %d" % i)
        for i in range(5):
            store.documents.write("doc", {"v": i})
        for _ in range(3):
            store.documents.write("scratch", {"tmp": True})
            store.documents.clear("scratch")
        store.records.commit([conversation(1)])  # a full-history (conversation-scoped) document, 4 revisions
        store.records.commit([create(doc_record(7, scope=conv_scope(1), key="notes"), base({"n": 0}))])
        for n in range(1, 4):
            store.records.commit([change(7, delta([set_op("n", n)]))])
    flags = [
        *("--dead-older-than", "60", "--events-older-than", "60", "--logs-older-than", "60"),
        *("--max-backups", "1", "--document-history", "2", "--document-history-older-than", "60"),
        *("--record-revisions", "2"),
    ]
    report = maintain(shared_url, *flags)
    assert report["policy"] == {
        "kv_log_max_age": 60.0,
        "dead_letter_max_age": 60.0,
        "max_backups": 1,
        "processed_event_max_age": 60.0,
        "settled_session_max_age": None,
        "document_history": 2,
        "document_history_max_age": 60.0,
        "max_record_revisions": 2,
        "record_revision_max_age": None,
    }
    assert report["dead_letters"] == 1 and report["log_entries"] == 3 and report["document_backups"] == 2
    assert report["processed_events"] == 3
    assert report["document_revisions"] == 4  # 5 recorded; an hour old, so all but the current one
    assert report["record_revisions"] == 2  # 4 stored, the newest 2 kept
    assert report["finished"] is True
    with durastate.open(shared_url) as store:
        assert store.queues.dead_letters("jobs") == []
        assert [n.revision for n in store.documents.history("doc").items] == [5]
        assert [d.key for d in store.documents.list("scratch").items] == ["scratch.bak.2"]
        assert len(store.records.document_revisions(7)) == 2 and store.records.document(7)["value"] == {"n": 3}
    settled = maintain(shared_url, "--sessions-settled-for", "60")
    assert settled["settled_sessions"] == 1 and settled["policy"]["settled_session_max_age"] == 60.0


def test_postgres_attempt_rows_are_pruned(shared_url: str) -> None:
    if not shared_url.startswith("postgresql"):
        pytest.skip("the attempt table exists on PostgreSQL only")
    from durastate.engines import postgres

    stale = 3 * postgres.ATTEMPT_PRUNE_BATCH + 10  # more than opening the store prunes (one batch)
    with durastate.open(shared_url) as store:
        engine = store.engine
        with store.transaction():
            for i in range(stale):
                engine.execute(
                    engine.sql(WRITE("INSERT INTO {p}attempt (id, created_at, result) VALUES (?, 0, NULL)")),
                    (b"stale-%d" % i,),
                )
    report = maintain(shared_url)
    assert report["engine_bookkeeping"] >= stale - postgres.ATTEMPT_PRUNE_BATCH
    with durastate.open(shared_url) as store:
        row = store.engine.one(store.engine.sql(READ("SELECT count(*) FROM {p}attempt WHERE created_at = 0")))
        assert row is not None and row[0] == 0


def test_plain_output_and_refused_flags(shared_url: str) -> None:
    with durastate.open(shared_url):
        pass
    done = run_cli(shared_url, "maintain", "--dead-older-than", "5", "--batch", "100")
    assert done.returncode == 0, done.stderr
    assert "expired_values: 0" in done.stdout and "finished: True" in done.stdout
    assert "policy: dead_letter_max_age=5 s" in done.stdout  # ages with their unit
    assert "maintain:" in done.stderr  # the summary line
    refused = run_cli(shared_url, "maintain", "--document-history-older-than", "60")
    assert refused.returncode == 2 and "needs --document-history" in refused.stderr
    quiet = run_cli(shared_url, "maintain", "--quiet")
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_progress_steps_are_plain_lines_without_rich(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "rich.progress", None)  # import fails: as without the [cli] extra
    with Progress("maintain", None, enabled=True) as progress:
        progress.step("expired_values", 20)
        progress.step("engine_bookkeeping", 3)
    assert capsys.readouterr().err.splitlines() == [
        "maintain: expired_values 20 rows (20 so far)",
        "maintain: engine_bookkeeping 3 rows (23 so far)",
    ]


def test_progress_steps_label_the_rich_bar() -> None:
    pytest.importorskip("rich.progress")
    progress = Progress("maintain", None, enabled=True)
    progress.step("document_revisions", 7)
    assert progress.rows == 7
    assert progress._bar.tasks[0].description == "maintain: document_revisions"


def test_the_summary_says_the_space_given_back_that_the_report_says(tmp_path: Any) -> None:
    """The stderr summary said '0 B' (no bytes are streamed) while the report said bytes_returned 24.2 KiB:
    the summary now counts rows only and adds the space the report gives."""
    from durastate.cli._format import human_bytes

    url = f"sqlite://{tmp_path / 's.db'}"
    with durastate.open(url, clock=an_hour_ago()) as store:
        store.kv.put_many(b"cache", b"http", [(b"%04d" % i, b"v" * 500) for i in range(400)], ttl=60)
    done = cli_here(url, "maintain", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["expired_values"] == 400 and report["bytes_returned"] > 0
    summary = done.stderr.decode()
    assert "maintain: 400 rows in " in summary
    assert summary.rstrip().endswith(f"; {human_bytes(report['bytes_returned'])} given back")
    assert "wal_checkpoint" not in report and "vacuum" not in report  # what docs/cli.md lists
