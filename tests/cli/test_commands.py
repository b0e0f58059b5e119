"""Every ``durastate`` command against a filled store on each engine.

``run`` runs a command in this process (``conftest.cli_here``: the exit
code and bytes of a real run, pinned by
``test_safe_output.test_in_process_runs_are_the_real_commands``);
``run_cli`` runs one in a subprocess, as a shell does, where the process is
the subject: no URL, a missing store, a usage error before any command,
the demo, rich or starlette missing.

Expectations come from ``durastate.testing.sample.fill``'s return value,
not from a previous run's output.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import durastate
from durastate.testing.sample import Sample

from .conftest import Run, as_text, cli_here, run_cli


def as_json(run: Run, *args: str) -> Any:
    return json.loads(run(*args, "--json").stdout)


def items(run: Run, *args: str) -> Any:
    """The items of a listing's one page (asserting it is the last)."""
    page = as_json(run, *args)
    assert page["next"] is None, page
    return page["items"]


def test_info_and_doctor(run: Run, filled: tuple[str, Sample]) -> None:
    info = as_json(run, "info")
    assert isinstance(info, dict)
    assert info["engine"] in ("sqlite", "postgresql")
    assert info["schema"]["kv"] >= 1 and info["problems"] == []
    assert info["integrity"].startswith("ok")
    assert "password" not in info["url"]
    doctor = run("doctor")
    assert "integrity" in doctor.stdout


def test_stats_counts_rows_per_facet(run: Run, filled: tuple[str, Sample]) -> None:
    _, sample = filled
    stats = as_json(run, "stats")
    assert isinstance(stats, dict)
    tables = {t["table"]: t["rows"] for t in stats["tables"]}
    assert tables["kv"] == len(sample.kv_values)
    assert tables["queue_dead"] == sum(q["dead"] for q in sample.queues.values())
    assert tables["documents"] == len(sample.documents)
    scopes = {g["name"]: g["rows"] for g in stats["top"]["kv scopes"]}
    assert scopes["run-1"] == sum(1 for s, _, _ in sample.kv_values if s == b"run-1")


def test_kv_ls_get_scan(run: Run, filled: tuple[str, Sample]) -> None:
    _, sample = filled
    assert [s["scope"] for s in items(run, "kv", "ls")] == [s.decode() for s in sample.kv_scopes]
    namespaces = items(run, "kv", "ls", "run-1")
    assert [n["namespace"] for n in namespaces] == ["blobs", "cfg", "log", "stats"]  # values, logs, counters
    held = {n["namespace"]: (n["values"], n["log_entries"], n["counters"]) for n in namespaces}
    assert held["log"] == (0, 2, 0) and held["stats"] == (0, 0, 1) and held["cfg"][1:] == (0, 0)
    assert (
        run("kv", "get", "run-1", "cfg", "model").stdout.strip()
        == sample.kv_values[(b"run-1", b"cfg", b"model")].decode()
    )
    binary = sample.kv_values[(b"run-1", b"blobs", b"\x00\xffbin")]
    got = as_json(run, "kv", "get", "run-1", "blobs", "hex:00ff62696e", "--format", "hex")
    assert got["value"] == binary.hex()
    parsed = as_json(run, "kv", "get", "run-1", "cfg", "params", "--format", "json")
    assert parsed["value"] == json.loads(sample.kv_values[(b"run-1", b"cfg", b"params")])
    scanned = items(run, "kv", "scan", "run-1", "cfg", "--prefix", "p")
    assert [r["key"] for r in scanned] == ["params"]
    blobs = items(run, "kv", "scan", "run-1", "blobs")
    assert blobs[0]["key"] == "hex:00ff62696e"  # not UTF-8: shown in the form arguments take
    missing = run("kv", "get", "run-1", "cfg", "nope", ok=False)
    assert missing.returncode == 3 and "no value" in missing.stderr


def test_queue_commands(run: Run, filled: tuple[str, Sample]) -> None:
    _, sample = filled
    listed = {
        q["queue"]: {k: q[k] for k in ("ready", "in_flight", "delayed", "dead")} for q in items(run, "queue", "ls")
    }
    assert listed == sample.queues
    assert as_json(run, "queue", "stats", "emails")["ready"] == sample.queues["emails"]["ready"]
    states = [i["state"] for i in items(run, "queue", "peek", "emails")]
    assert states.count("leased") == 1 and states.count("delayed") == 1
    [dead] = items(run, "queue", "dead", "fragile")
    assert dead["last_error"] == "smtp timeout" and dead["payload"] == '{"job": 7}'
    refused = run("queue", "redrive", "fragile", ok=False)  # a write, and no terminal to confirm on
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert as_json(run, "queue", "stats", "fragile")["dead"] == 1
    assert as_json(run, "queue", "redrive", "fragile", "--yes") == {"moved": 1}
    assert as_json(run, "queue", "stats", "fragile")["ready"] == 1


def test_events_commands(run: Run, filled: tuple[str, Sample]) -> None:
    _, sample = filled
    sessions = items(run, "events", "sessions")
    assert [s["session"] for s in sessions] == sample.sessions
    events = items(run, "events", "read", "chat-1")
    assert {e["id"]: e["state"] for e in events} == {
        "m1": "processed",
        "m2": "pending",
        "t1": "dead",
        "r1": "processed",
    }
    assert items(run, "events", "claims", "chat-1") == []  # m1 completed, t1 dead-lettered: no live claim
    url, _ = filled
    with durastate.open(url) as store:
        claimed = store.events.claim_available("chat-2", holder="worker-z", ttl_ms=600_000)
    [claim] = items(run, "events", "claims", "chat-2")
    assert (claim["id"], claim["holder"], claim["expired"]) == ("x1", "worker-z", False)
    assert claim["attempts"] == claimed.events[0].attempt_count == 1
    assert 0 < claim["lease_left"] <= 600  # seconds in JSON; "10 min" in the table


def test_docs_commands(run: Run, filled: tuple[str, Sample]) -> None:
    _, sample = filled
    listed = items(run, "docs", "ls")
    assert {d["key"]: d["revision"] for d in listed} == sample.documents
    shown = as_json(run, "docs", "show", "runs/1")
    assert shown["revision"] == sample.documents["runs/1"] and shown["data"]["state"] == "running"
    assert run("docs", "show", "absent", ok=False).returncode == 3


def test_docs_history(run: Run, filled: tuple[str, Sample]) -> None:
    _, sample = filled
    writes = sample.document_writes["runs/1"]
    history = as_json(run, "docs", "history", "runs/1")
    assert isinstance(history, dict)
    assert history["revision"] == sample.documents["runs/1"] == len(writes)
    assert [(r["revision"], r["data"]) for r in history["revisions"]] == [
        (n, writes[n - 1]) for n in range(len(writes), 0, -1)
    ]
    assert [r["since"] for r in history["revisions"]] == [*range(len(writes) - 1, 0, -1), None]
    assert history["next"] is None and history["backups"] == []
    # Paged newest first: one revision a page, the next page below the cursor.
    first = as_json(run, "docs", "history", "runs/1", "--limit", "1")
    assert [r["revision"] for r in first["revisions"]] == [3] and first["next"] == 3  # type: ignore[index]
    assert first["revisions"][0]["since"] == 2  # type: ignore[index]  # diffed even at a page's end
    second = as_json(run, "docs", "history", "runs/1", "--limit", "1", "--before", "3")
    assert [r["revision"] for r in second["revisions"]] == [2]  # type: ignore[index]
    diff = run("docs", "history", "runs/1", "--diff").stdout
    assert '-  "step": 3\n+  "step": 4,\n+  "worker": "worker-b"' in diff
    table = run("docs", "history", "runs/1").stdout
    assert "first recorded" in table and "+2 -1 lines" in table
    # A cleared document: no history left, its backup listed; no trace at all: exit 1.
    cleared = as_json(run, "docs", "history", "scratch")
    assert cleared["revision"] is None and cleared["revisions"] == []  # type: ignore[index]
    assert [b["key"] for b in cleared["backups"]] == ["scratch.bak"]  # type: ignore[index]
    absent = run("docs", "history", "absent", ok=False)
    assert absent.returncode == 3 and "no document 'absent'" in absent.stderr


def test_docs_history_of_a_store_that_does_not_record(shared_url: str) -> None:
    with durastate.open(shared_url) as store:
        store.documents.write("plain", {"v": 1})
        store.documents.write("plain", {"v": 2})
    done = as_text(cli_here(shared_url, "docs", "history", "plain"))
    assert done.returncode == 0, done.stderr
    assert "revision 2" in done.stdout and "no recorded revisions" in done.stdout


def test_records_commands(run: Run, filled: tuple[str, Sample]) -> None:
    _, sample = filled
    convs = items(run, "records", "conversations")
    assert {c["id"]: c["parent"] for c in convs} == sample.conversations
    fork = next(c for c, parent in sample.conversations.items() if parent is not None)
    root = sample.conversations[fork]
    entries = items(run, "records", "entries", str(fork))
    # The fork sees its own entries and its parent's up to the fork point only.
    visible = {e["id"] for e in entries}
    assert visible == {*sample.entries[fork], sample.entries[root][0]}
    revisions = items(run, "records", "document", str(sample.record_document), "--revisions")
    assert [r["seq"] for r in revisions] == sample.record_document_seqs
    first = json.loads(
        run("records", "document", str(sample.record_document), "--at", str(sample.record_document_seqs[0])).stdout
    )
    assert first["value"] == {"city": None, "days": 3}


def test_presence_commands(run: Run, filled: tuple[str, Sample]) -> None:
    _, sample = filled
    assert [n["namespace"] for n in items(run, "presence")] == list(sample.presence)
    fields = items(run, "presence", "room-1")
    assert sorted({f["participant"] for f in fields}) == sample.presence["room-1"]


def test_maintain(run: Run, filled: tuple[str, Sample]) -> None:
    report = as_json(run, "maintain", "--dead-older-than", "0", "--events-older-than", "0", "--vacuum")
    assert isinstance(report, dict)
    assert report["dead_letters"] == 1 and report["expired_values"] == 0 and report["finished"] is True
    assert report["vacuum"] == "ok"
    assert as_json(run, "queue", "stats", "fragile")["dead"] == 0


def test_bench_on_a_scratch_store(run: Run) -> None:
    rows = json.loads(run_cli(None, "bench", "--ops", "20", "--json").stdout)
    assert [r["ops"] for r in rows] == [20] * len(rows) and all(r["ops_per_s"] > 0 for r in rows)


def test_bench_leaves_the_store_as_it_was(run: Run, filled: tuple[str, Sample]) -> None:
    before = as_json(run, "stats")
    run("bench", "--ops", "10", "--url", filled[0])
    assert as_json(run, "stats")["tables"] == before["tables"]  # type: ignore[index]


def test_bench_never_writes_into_the_store_durastate_url_names(tmp_path: Path) -> None:
    """DURASTATE_URL is the application's store (the docs say to export it): bench ignores it and runs on a
    temporary file; with --url it uses DURASTATE_PREFIX, so it adds no second set of ds_ tables either."""
    import sqlite3

    path = tmp_path / "app.db"
    with durastate.open(path, prefix="app_") as store:
        store.kv.put(b"s", b"n", b"k", b"v")

    def tables() -> list[str]:
        with contextlib.closing(sqlite3.connect(path)) as db:
            return sorted(r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))

    before = tables()
    done = as_text(cli_here(str(path), "bench", "--ops", "10", env={"DURASTATE_PREFIX": "app_"}))
    assert done.returncode == 0, done.stderr
    assert "ignores DURASTATE_URL" in done.stderr
    assert tables() == before
    explicit = as_text(cli_here(None, "bench", "--ops", "10", "--url", str(path), env={"DURASTATE_PREFIX": "app_"}))
    assert explicit.returncode == 0, explicit.stderr
    assert tables() == before  # the app_ tables, scratch rows removed; no ds_ set
    with durastate.open(path, prefix="app_") as store:
        assert store.kv.get(b"s", b"n", b"k") == b"v"


def test_export_import_and_backup(run: Run, filled: tuple[str, Sample], tmp_path: Path) -> None:
    dump = tmp_path / "dump.jsonl.gz"
    run("export", str(dump))
    copy = tmp_path / "copy.db"
    run_done = as_text(cli_here(f"sqlite://{copy}", "import", str(dump), "--json"))
    assert run_done.returncode == 0, run_done.stderr
    assert json.loads(run_done.stdout)["rows"] == sum(t["rows"] for t in as_json(run, "stats")["tables"])  # type: ignore[index]
    again = as_text(cli_here(f"sqlite://{copy}", "import", str(dump)))
    assert again.returncode == 1 and "not empty" in again.stderr
    assert copy.exists()  # a store that was there before stays
    (tmp_path / "broken.jsonl").write_bytes(b"\n".join(gzip.decompress(dump.read_bytes()).splitlines()[:-1]))
    fresh = tmp_path / "fresh.db"
    broken = as_text(cli_here(f"sqlite://{fresh}", "import", str(tmp_path / "broken.jsonl")))
    assert broken.returncode == 1 and "truncated" in broken.stderr
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("fresh.db")]  # the store it created is gone
    target = tmp_path / "backup.db"
    done = run("backup", str(target), "--json")
    result = json.loads(done.stdout)
    if result["kind"] == "file":
        with durastate.open(target) as b:
            assert b.kv.get(b"run-1", b"cfg", b"model") == filled[1].kv_values[(b"run-1", b"cfg", b"model")]
    else:
        assert "pg_dump" in done.stderr
    assert not [p for p in tmp_path.iterdir() if ".partial-" in p.name]


def test_usage_error_exits_2_and_missing_store_exits_3(tmp_path: Path, run: Run) -> None:
    assert run_cli(None, "kv", "get").returncode == 2
    bad_hex = run("kv", "get", "hex:zz", "ns", "key", ok=False)
    assert bad_hex.returncode == 2 and "hex digits" in bad_hex.stderr
    assert run_cli(None, "no-such-command").returncode == 2
    missing = run_cli(str(tmp_path / "nope.db"), "info")
    assert missing.returncode == 3 and "no store" in missing.stderr
    assert not (tmp_path / "nope.db").exists()


def test_demo_refuses_an_explicit_url() -> None:
    assert run_cli(None, "demo", "--url", "x.db").returncode == 2


def test_plain_text_without_rich(filled: tuple[str, Sample], tmp_path: Path) -> None:
    url, sample = filled
    hide_rich = (
        "import sys; sys.modules['rich'] = None; from durastate.cli import main; sys.argv[0] = 'durastate'; main()"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("DURASTATE_")}
    env["DURASTATE_URL"] = url

    def plain(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", hide_rich, *args], capture_output=True, text=True, env=env, timeout=120, check=False
        )

    listed = plain("queue", "ls")
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["QUEUE", "READY", "IN_FLIGHT", "DELAYED", "DEAD"]
    assert [r.split()[0] for r in rows] == list(sample.queues)
    exported = plain("export", str(tmp_path / "plain.jsonl"))
    assert exported.returncode == 0 and "rows/s" in exported.stderr  # the summary line, without a bar


def test_ui_without_the_extra_names_it(filled: tuple[str, Sample]) -> None:
    url, _ = filled
    hide = "import sys; sys.modules['starlette'] = None; from durastate.cli import main; main()"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DURASTATE_")}
    done = subprocess.run(
        [sys.executable, "-c", hide, "ui", "--url", url, "--port", "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1 and "pip install 'durastate[ui]'" in done.stderr


OUT_OF_INT64 = "99999999999999999999999"


def test_malformed_or_out_of_range_numbers_are_usage_errors_naming_the_argument(run: Run) -> None:
    """A number past int64 (SQLite's driver raised OverflowError on it) or not a number at all is a bad
    argument: exit 2 and the argument's name, never a traceback or an InvalidRequest exit 1."""
    for args, named in (
        (("kv", "log", "run-1", "log", "stream", "--after", OUT_OF_INT64), "--after"),
        (("kv", "log", "run-1", "log", "stream", "--after", "garbage"), "--after"),
        (("queue", "peek", "emails", "--after", "garbage"), "--after"),
        (("queue", "dead", "emails", "--after", OUT_OF_INT64), "--after"),
        (("records", "entries", OUT_OF_INT64), "CONVERSATION"),
        (("records", "document", OUT_OF_INT64), "ID"),
        (("docs", "history", "runs/1", "--before", OUT_OF_INT64), "--before"),
        (("events", "read", "s", "--after", OUT_OF_INT64), "--after"),
        (("events", "dead", "--after", f"{OUT_OF_INT64}:s"), "--after"),
    ):
        done = run(*args, ok=False)
        assert done.returncode == 2, (args, done.stderr)
        assert named in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)


def test_the_cli_log_listing_refuses_an_ordinal_past_int64_as_the_facet_does(filled: tuple[str, Sample]) -> None:
    from durastate.cli import kvlisting

    with durastate.open(filled[0], read_only=True) as store:
        for read in (
            lambda: list(store.kv.log(b"run-1", b"log", b"stream", after=int(OUT_OF_INT64))),
            lambda: kvlisting.log_entries(store.engine, b"run-1", b"log", b"stream", int(OUT_OF_INT64), 10),
        ):
            with pytest.raises(durastate.InvalidRequest, match="64-bit"):
                read()


def test_redrive_of_something_that_does_not_exist_is_not_found_and_moves_nothing(run: Run) -> None:
    """As `events read nosuch` is: exit 3 with a message, for a missing queue, dead letter id, session or dead
    event index; an --id list with one missing id moves none of them. A queue that exists with nothing dead
    still re-drives 0."""
    [dead] = items(run, "queue", "dead", "fragile")
    [dead_event] = items(run, "events", "dead", "chat-1")
    for args, said in (
        (("queue", "redrive", "fragile", "--id", "999"), "no dead letter 999 in queue fragile"),
        (("queue", "redrive", "fragile", "--id", str(dead["id"]), "--id", "999"), "no dead letter 999"),
        (("queue", "redrive", "nosuchq"), "no queue nosuchq"),
        (("events", "redrive", "nosuch"), "no event session 'nosuch'"),
        (("events", "redrive", "chat-1", "--index", "999"), "no dead event at index 999"),
        (("events", "redrive", "chat-1", "--index", str(dead_event["index"]), "--index", "0"), "index 0"),
    ):
        done = run(*args, "--yes", ok=False)
        assert done.returncode == 3 and said in done.stderr, (args, done.returncode, done.stderr)
    assert [d["id"] for d in items(run, "queue", "dead", "fragile")] == [dead["id"]]
    assert [e["index"] for e in items(run, "events", "dead", "chat-1")] == [dead_event["index"]]
    assert run("queue", "redrive", "emails", "--yes").stdout.startswith("re-drove 0")


def test_a_url_that_names_no_store_is_a_usage_error(tmp_path: Path) -> None:
    """An empty --url, memory: (another process's in-memory store is out of reach) and a malformed sqlite URL
    are bad arguments (exit 2, naming --url), not store errors (exit 1)."""
    for url in ("", "memory:", "sqlite://relative.db"):
        done = as_text(cli_here(None, "info", "--url", url))
        assert done.returncode == 2 and "--url" in done.stderr, (url, done.stderr)
    assert not list(tmp_path.iterdir())


def test_not_found_reads_the_same_whoever_found_it(run: Run) -> None:
    """The command's own "not found" and durastate's NotFound (records) read alike: Error: NotFound: ..."""
    for args in (
        ("records", "entries", "999"),
        ("docs", "show", "nosuch"),
        ("kv", "get", "nosuch", "n", "k"),
        ("events", "read", "nosuch"),
    ):
        done = run(*args, ok=False)
        assert done.returncode == 3 and done.stderr.startswith("Error: NotFound: "), (args, done.stderr)
        assert "NotFound: NotFound" not in done.stderr


def test_export_and_backup_check_dest_before_any_work(run: Run, tmp_path: Path) -> None:
    """A folder that does not exist or a directory as DEST is a usage error naming the user's path (never the
    hidden temporary name); an existing DEST is refused by export as by backup, unless export --force."""
    missing_folder = str(tmp_path / "nodir" / "x.jsonl")
    for command in ("export", "backup"):
        done = run(command, missing_folder, ok=False)
        assert done.returncode == 2 and "does not exist" in done.stderr and ".partial" not in done.stderr
        directory = run(command, str(tmp_path), ok=False)
        assert directory.returncode == 2 and "is a directory" in directory.stderr
    existing = tmp_path / "old.jsonl"
    existing.write_text("keep me")
    for command in ("export", "backup"):
        refused = run(command, str(existing), ok=False)
        assert refused.returncode == 1 and "exists" in refused.stderr
        assert existing.read_text() == "keep me"
    run("export", str(existing), "--force", "--quiet")
    assert existing.read_text().startswith("{")
    assert not [p for p in tmp_path.iterdir() if ".partial-" in p.name]


def test_queue_peek_table_shows_the_cursor_that_pages_on(run: Run) -> None:
    page = as_json(run, "queue", "peek", "emails", "--limit", "2")
    table = run("queue", "peek", "emails", "--limit", "2").stdout
    assert "cursor" in table and all(item["cursor"] in table for item in page["items"])


def test_help_states_the_token_rules(run: Run) -> None:
    assert "16 or more of A-Z a-z 0-9 - _ . ~" in " ".join(run("ui", "--help").stdout.split())
