"""The command line is safe with any bytes: escaped output, lossless JSON, paging, exit codes, EPIPE, modes.

Each test plants its own data (control bytes, invalid UTF-8, bidi
overrides, rich markup) in a store on each shareable engine and runs the
commands; raw stdout/stderr bytes are checked, so nothing a terminal would
act on can slip through a decoding step of the test itself. Most commands
run in this process (``cli_here``: the same bytes and exit code, without a
second of interpreter start each); a subprocess, as a user's shell runs
the command, where the process is the subject (EPIPE, argv bytes, ``TZ``,
exit codes of a missing store or unsupported URL), and for the first and
last page of a walk and the commands of
``test_in_process_runs_are_the_real_commands``, which pins that both ways
give the same bytes.
"""

from __future__ import annotations

import datetime
import gzip
import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import durastate
from durastate.cli._format import decode_bytes, encode_bytes, escape, human_bytes, human_duration, show_value
from durastate.testing.sample import Sample

from .conftest import Run, cli_here, run_cli

# What a terminal acts on, as the bytes that would reach it (UTF-8 for the characters).
FORBIDDEN = [bytes([b]) for b in (*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F)] + [
    chr(c).encode() for c in (*range(0x80, 0xA0), 0x202E, 0x2066, 0x200B, 0xFEFF, 0xE0041)
]
EVIL = (
    b"A\x1b[31mred\x1b]0;title\x07\x00nul\rCR\x7fdel\xc2\x9bC1 \xe2\x80\xaeRLO \xf3\xa0\x81\x81tag \x80\xff[bold]x[/]"
)


def cli(url: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """``durastate ARGS`` in a subprocess, raw bytes (``cli_here`` runs it in this process)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("DURASTATE_")}
    full.update({"DURASTATE_URL": url, **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "durastate.cli", *args], capture_output=True, env=full, timeout=120, check=False
    )


def assert_safe(done: subprocess.CompletedProcess[bytes]) -> None:
    for stream in (done.stdout, done.stderr):
        # Newlines end lines; a table's frame is drawn with box characters, never escapes.
        for bad in FORBIDDEN:
            assert bad not in stream, (bad, stream[:2000])


@pytest.fixture
def evil(shared_url: str) -> str:
    """A store whose names, values, errors and payloads hold EVIL (its text without NUL where text is stored)."""
    text = TEXT
    with durastate.open(shared_url) as store:
        store.kv.put(b"s", b"n", EVIL, EVIL)
        store.kv.put(b"s", b"n", b"plain", EVIL)
        store.kv.append(b"s", b"n", EVIL, EVIL)
        store.kv.incr(b"s", b"n", EVIL, 3)
        store.queues.push(EVIL, [EVIL], max_attempts=1)
        claim = store.queues.claim(EVIL)
        assert claim is not None
        claim.nack(error=text)
        store.queues.push(EVIL, [EVIL])
        store.documents.write("doc-" + text, {"text": text})
        store.events.append("sess-" + text, [{"id": "e1", "type": text, "payload": {"text": text}}])
        claimed = store.events.claim_available("sess-" + text, holder="w", ttl_ms=60_000)
        event = claimed.events[0]
        store.events.fail_attempt(event.session_id, event.index, event.attempt_count, text, max_failures=1)
        store.presence.set("room", "p-" + text, {"f": text}, at_ms=store.engine.now_ms(), seen=1, ttl_ms=600_000)
    return shared_url


# Text columns (document keys, session ids, errors) refuse NUL on both engines.
TEXT = EVIL.decode("utf-8", "replace").replace("\x00", "")
EVIL_NAME = encode_bytes(EVIL)  # not UTF-8: the hex: form


def test_nothing_unescaped_reaches_the_terminal(evil: str) -> None:
    text = TEXT
    commands = [
        ("kv", "ls"),
        ("kv", "ls", "s"),
        ("kv", "get", "s", "n", "plain"),
        ("kv", "get", "s", "n", EVIL_NAME),
        ("kv", "scan", "s", "n"),
        ("kv", "log", "s", "n"),
        ("kv", "log", "s", "n", EVIL_NAME),
        ("kv", "counter", "s", "n"),
        ("queue", "ls"),
        ("queue", "peek", EVIL_NAME),
        ("queue", "dead", EVIL_NAME),
        ("events", "sessions"),
        ("events", "read", "sess-" + text),
        ("events", "dead"),
        ("docs", "ls"),
        ("docs", "show", "doc-" + text),
        ("presence", "room"),
        ("stats",),
    ]
    for args in commands:
        for extra in ((), ("--json",)):
            done = cli_here(evil, *args, *extra)
            assert done.returncode == 0, (args, done.stderr)
            assert_safe(done)
    # A real process's streams: a value and an error message (the other commands' bytes are the same in
    # this process: test_in_process_runs_are_the_real_commands).
    plain = cli(evil, "kv", "get", "s", "n", "plain").stdout
    assert plain == (show_value(EVIL, keep_newlines=True) + "\n").encode()
    assert b"\\x1b[31mred" in plain and b"\\r" in plain and b"\\u009b" in plain and b"\\u202e" in plain
    assert b"\\x80\\xff" in plain  # invalid UTF-8 shows as the bytes it is
    assert b"[bold]x[/]" in cli_here(evil, "kv", "scan", "s", "n").stdout  # rich markup is shown, not applied
    # An error message naming planted text is escaped too.
    missing = cli(evil, "docs", "show", "absent-" + text)
    assert missing.returncode == 3
    assert_safe(missing)
    assert b"\\x1b" in missing.stderr


def test_in_process_runs_are_the_real_commands(evil: str) -> None:
    """What ``cli_here`` runs in this process gives the exit code and the stdout and stderr bytes of the same
    command in a subprocess (``python -m durastate.cli``): a table with a page's hint on stderr, JSON, an
    escaped value, an escaped "not found" (exit 3), a refused write (exit 2). The paging test compares the
    first and last page of a walk too; test_exit_codes runs a missing store and an unsupported URL for real."""
    commands = [
        ("kv", "scan", "s", "n", "--limit", "1"),
        ("queue", "dead", EVIL_NAME, "--json"),
        ("kv", "get", "s", "n", "plain"),
        ("docs", "show", "absent-" + TEXT),
        ("queue", "redrive", EVIL_NAME),  # a write, and no terminal to confirm on
    ]
    for args in commands:
        real, here = cli(evil, *args), cli_here(evil, *args)
        assert (real.returncode, real.stdout, real.stderr) == (here.returncode, here.stdout, here.stderr), args
    assert [cli_here(evil, *args).returncode for args in commands] == [0, 0, 0, 3, 2]


def test_json_is_lossless_and_feeds_back_as_arguments(evil: str) -> None:
    [row] = [
        r for r in json.loads(cli_here(evil, "kv", "scan", "s", "n", "--json").stdout)["items"] if r["key"] != "plain"
    ]
    assert row["key"] == "hex:" + EVIL.hex() and decode_bytes(row["value"]) == EVIL
    got = json.loads(cli_here(evil, "kv", "get", "s", "n", row["key"], "--json").stdout)
    assert decode_bytes(got["key"]) == EVIL and decode_bytes(got["value"]) == EVIL and got["size"] == len(EVIL)
    [log] = json.loads(cli_here(evil, "kv", "log", "s", "n", row["key"], "--json").stdout)["items"]
    assert decode_bytes(log["value"]) == EVIL
    assert json.loads(cli_here(evil, "kv", "counter", "s", "n", row["key"], "--json").stdout)["value"] == 3
    [item] = json.loads(cli_here(evil, "queue", "peek", row["key"], "--json").stdout)["items"]
    assert decode_bytes(item["payload"]) == EVIL
    # --format hex gives the exact bytes as digits.
    assert cli_here(evil, "kv", "get", "s", "n", row["key"], "--format", "hex").stdout.strip() == EVIL.hex().encode()


@pytest.mark.parametrize(
    "value",
    [b"", b"plain", b"hex:", b"hex:00", b"\x00", b"\xff", "é€😀".encode(), b"\x1b[0m", EVIL, bytes(range(256))],
)
def test_the_bytes_form_round_trips(value: bytes) -> None:
    text = encode_bytes(value)
    assert decode_bytes(text) == value
    assert text.startswith("hex:") == (value.startswith(b"hex:") or not _utf8(value))
    assert json.loads(json.dumps(text)) == text


def _utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_a_raw_non_utf8_argument_names_those_bytes(shared_url: str) -> None:
    with durastate.open(shared_url) as store:
        store.kv.put(b"s", b"n", b"\x80\xfe", b"found")
    # What a shell passes for $'\x80\xfe': Python hands it over as surrogate escapes.
    raw = subprocess.run(
        [sys.executable, "-m", "durastate.cli", "kv", "get", "s", "n", os.fsdecode(b"\x80\xfe"), "--url", shared_url],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert raw.returncode == 0 and raw.stdout == b"found\n", raw.stderr


def test_export_import_round_trips_non_utf8_data(evil: str, tmp_path: Path) -> None:
    dump = tmp_path / "evil.jsonl"
    assert cli(evil, "export", str(dump), "--quiet").returncode == 0
    copy = f"sqlite://{tmp_path / 'copy.db'}"
    done = cli(copy, "import", str(dump), "--quiet")
    assert done.returncode == 0, done.stderr
    with durastate.open(copy) as store:
        assert store.kv.get(b"s", b"n", EVIL) == EVIL
        assert list(store.kv.log(b"s", b"n", EVIL)) == [(1, EVIL)]
        assert store.kv.counter(b"s", b"n", EVIL) == 3
        assert store.queues.names() == [EVIL]


# -- paging ------------------------------------------------------------------------


def walk(url: str, *args: str, limit: int, field: str, pages: list[list[str]] | None = None) -> list[Any]:
    """Every item of a listing, page by page through --after (in this process); asserts each page's size and
    hint. ``pages`` collects each page's arguments."""
    seen: list[Any] = []
    after: list[str] = []
    while True:
        if pages is not None:
            pages.append([*args, "--limit", str(limit), *after])
        page = json.loads(cli_here(url, *args, "--limit", str(limit), *after, "--json").stdout)
        assert len(page["items"]) <= limit
        seen += [item[field] for item in page["items"]]
        table = cli_here(url, *args, "--limit", str(limit), *after)
        if page["next"] is None:
            assert b"more:" not in table.stderr
            return seen
        assert len(page["items"]) == limit
        assert f"more: --after {page['next']}".encode() in table.stderr or b"more: --after 'hex:" in table.stderr
        after = ["--after", str(page["next"])]


PAGED = 11


def test_cursor_paging_reaches_the_end_without_duplicates_or_gaps(shared_url: str) -> None:
    # PAGED items and the page sizes below make two to four pages per listing (each page is two CLI runs, in
    # this process; the first and the last page of the first walk again in a subprocess, as a shell runs them).
    keys = [b"k%02d" % i for i in range(PAGED)] + [b"\xff\x00", b"\x00bin", b"hex:k"]
    with durastate.open(shared_url) as store:
        for k in keys:
            store.kv.put(b"s", b"n", k, b"v")
            store.kv.put(b"scope-" + k, b"n", b"k", b"v")
            store.kv.append(b"s", b"logs", k, b"entry")
            store.kv.incr(b"s", b"counters", k)
            store.queues.push(b"q", [k])
            store.queues.push(b"queue-" + k, [b"x"])
        for i in range(PAGED):
            store.kv.append(b"s", b"logs", b"one", b"%d" % i)
            store.documents.write(f"doc/{i:02d}", {"i": i})
            store.events.append(f"sess-{i:02d}", [{"id": f"e-{i}", "type": "t"}])
        store.events.append("big", [{"id": f"big-{i}", "type": "t"} for i in range(PAGED)])
        store.queues.push(b"dying", [b"x"], max_attempts=1)
    ordered = [encode_bytes(k) for k in sorted(keys)]
    pages: list[list[str]] = []
    assert walk(shared_url, "kv", "scan", "s", "n", limit=5, field="key", pages=pages) == ordered
    assert len(pages) == 3
    for args in (pages[0], pages[-1]):  # the cursor a page ends with works as a real argument, and the same bytes
        for extra in ((), ("--json",)):
            real, here = cli(shared_url, *args, *extra), cli_here(shared_url, *args, *extra)
            assert (real.returncode, real.stdout, real.stderr) == (here.returncode, here.stdout, here.stderr)
    assert walk(shared_url, "kv", "scan", "s", "n", "--reverse", limit=4, field="key") == ordered[::-1]
    assert walk(shared_url, "kv", "scan", "s", "n", "--prefix", "k", limit=6, field="key") == ordered[2:-1]
    scopes = walk(shared_url, "kv", "ls", limit=5, field="scope")
    assert scopes == ["s", *(encode_bytes(b"scope-" + k) for k in sorted(keys))]
    assert walk(shared_url, "kv", "log", "s", "logs", limit=4, field="key") == sorted(
        [*ordered, "one"], key=decode_bytes
    )
    assert walk(shared_url, "kv", "log", "s", "logs", "one", limit=4, field="value") == [str(i) for i in range(PAGED)]
    assert walk(shared_url, "kv", "counter", "s", "counters", limit=7, field="key") == ordered
    assert len(walk(shared_url, "queue", "ls", limit=4, field="queue")) == len(keys) + 2
    assert walk(shared_url, "queue", "peek", "q", limit=5, field="payload") == [encode_bytes(k) for k in keys]
    assert walk(shared_url, "docs", "ls", limit=5, field="key") == [f"doc/{i:02d}" for i in range(PAGED)]
    assert walk(shared_url, "events", "sessions", "--prefix", "sess-", limit=5, field="session") == [
        f"sess-{i:02d}" for i in range(PAGED)
    ]
    assert walk(shared_url, "events", "read", "big", limit=5, field="id") == [f"big-{i}" for i in range(PAGED)]


# -- exit codes ---------------------------------------------------------------------


def test_exit_codes(run: Run, tmp_path: Path) -> None:
    not_found = [
        ("kv", "get", "run-1", "cfg", "nope"),
        ("kv", "log", "run-1", "log", "nope"),
        ("kv", "counter", "run-1", "stats", "nope"),
        ("docs", "show", "nope"),
        ("docs", "history", "nope"),
        ("events", "read", "no-such-session"),
        ("records", "document", "999999"),
        ("import", str(tmp_path / "no-such-file.jsonl")),
    ]
    for args in not_found:
        done = run(*args, ok=False)
        assert done.returncode == 3, (args, done.stderr)
        assert "Traceback" not in done.stderr
    assert run_cli(str(tmp_path / "absent.db"), "kv", "ls").returncode == 3
    # A key that holds a log: "not found" names what is there.
    log = run("kv", "get", "run-1", "log", "stream", ok=False)
    assert log.returncode == 3 and "it holds a log" in log.stderr
    # Empty listings are not "not found".
    assert json.loads(run("queue", "peek", "never-used", "--json").stdout) == {"items": [], "next": None}
    # Usage errors.
    assert run("kv", "get", "hex:0", "n", "k", ok=False).returncode == 2
    assert run("kv", "scan", "run-1", "cfg", "--prefix", "a", "--start", "b", ok=False).returncode == 2
    mysql = run_cli("mysql://x@y/z", "kv", "ls")
    assert mysql.returncode == 2 and "not supported" in mysql.stderr and "postgresql:" in mysql.stderr
    assert "no store" not in mysql.stderr


def test_port_in_use_exits_4(filled: tuple[str, Sample]) -> None:
    pytest.importorskip("uvicorn")
    url, _ = filled
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = run_cli(url, "ui", "--port", str(port))
    assert done.returncode == 4 and "in use" in done.stderr and "Traceback" not in done.stderr


def test_broken_pipe_exits_quietly(shared_url: str) -> None:
    with durastate.open(shared_url) as store:
        store.kv.put_many(b"big", b"n", [(b"%06d" % i, b"x" * 1000) for i in range(2000)])
    for args in (("export", "-", "--quiet"), ("kv", "scan", "big", "n", "--limit", "2000")):
        env = {k: v for k, v in os.environ.items() if not k.startswith("DURASTATE_")}
        env["DURASTATE_URL"] = shared_url
        proc = subprocess.Popen(
            [sys.executable, "-m", "durastate.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        assert proc.stdout is not None and proc.stderr is not None
        assert len(proc.stdout.read(100)) == 100
        proc.stdout.close()  # what `| head -c 100` does once it has its bytes
        err = proc.stderr.read()
        assert proc.wait(timeout=120) == 141, err
        assert err == b"", err  # no traceback, no "Error:"


# -- files, time, humanised output ---------------------------------------------------------


def test_exports_and_backups_are_0600(run: Run, tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        for name in ("e.jsonl", "e.jsonl.gz", "b.db"):
            command = "backup" if name.endswith(".db") else "export"
            run(command, str(tmp_path / name), "--quiet")
            assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name
    finally:
        os.umask(old)
    assert gzip.decompress((tmp_path / "e.jsonl.gz").read_bytes()).startswith(b'{"format"')


def test_times_carry_their_offset(filled: tuple[str, Sample]) -> None:
    url, _ = filled
    india = {"TZ": "Asia/Kolkata"}
    [first, *_] = json.loads(cli(url, "events", "read", "chat-1", "--json", env=india).stdout)["items"]
    created = datetime.datetime.fromisoformat(first["created"])
    assert created.utcoffset() == datetime.timedelta(hours=5, minutes=30) and first["created"].endswith("+05:30")
    with durastate.open(url) as store:
        [event, *_] = store.events.read_events("chat-1").events
    assert round(created.timestamp() * 1000) == event.created_at
    table = cli(url, "events", "read", "chat-1", env=india).stdout.decode()
    assert created.strftime("%Y-%m-%d %H:%M:%S") in table and "+05:30" in table


def test_claims_show_a_duration_with_its_unit(filled: tuple[str, Sample]) -> None:
    url, _ = filled
    with durastate.open(url) as store:
        store.events.claim_available("chat-2", holder="worker-z", ttl_ms=600_000)
    table = cli_here(url, "events", "claims", "chat-2").stdout.decode()
    assert " min " in table or "10 min" in table


def test_formatting_rules() -> None:
    assert [human_duration(s) for s in (0.00008, 0.25, 1.5, 59, 180, 5400, 3 * 86400, -2)] == [
        "80 µs",
        "250 ms",
        "1.5 s",
        "59 s",
        "3 min",
        "1.5 h",
        "3 d",
        "-2 s",
    ]
    assert [human_bytes(n) for n in (0, 512, 1536, 3 * 1024**3)] == ["0 B", "512 B", "1.5 KiB", "3.0 GiB"]
    assert escape("a\tb\nc", keep_newlines=True) == "a\tb\nc" and escape("a\tb\nc") == "a\\tb\\nc"
    assert escape("\u200d\u00e9") == "\u200d\u00e9"  # ZWJ (emoji sequences) and letters stay


def test_stats_info_backup_and_doctor_speak_in_units(run: Run, tmp_path: Path) -> None:
    stats = run("stats").stdout
    assert " KiB " in stats or " B " in stats
    info = json.loads(run("info", "--json").stdout)
    if info["engine"] == "sqlite":
        assert info["synchronous"] in ("NORMAL", "FULL") and info["auto_vacuum"] == "INCREMENTAL"
        done = run("backup", str(tmp_path / "b.db"))
        assert "pages to" in done.stdout and " pages, " in done.stderr and "rows" not in done.stderr
    doctor = json.loads(run("doctor", "--json").stdout)
    assert doctor["verdict"] in ("ok", "warning")
    checks = {c["check"]: c["verdict"] for c in doctor["checks"]}
    assert checks["store opens"] == "ok" and any(name.startswith("integrity") for name in checks)
    text = run("doctor").stdout
    assert "verdict:" in text and "integrity" in text
    assert "page_size" not in text and "file_bytes" not in text  # the facts are info's (doctor --json adds them)


# -- logs, counters, dead events, records documents, dry runs ------------------------------


def test_logs_and_counters_are_visible(run: Run) -> None:
    [log] = json.loads(run("kv", "log", "run-1", "log", "--json").stdout)["items"]
    assert (log["key"], log["entries"]) == ("stream", 2)
    entries = json.loads(run("kv", "log", "run-1", "log", "stream", "--json").stdout)["items"]
    assert [e["value"] for e in entries] == ["started", "step-1"] and entries[0]["ordinal"] < entries[1]["ordinal"]
    assert datetime.datetime.fromisoformat(entries[0]["appended"]).utcoffset() is not None
    assert run("kv", "counter", "run-1", "stats", "rows").stdout.strip() == "42"
    assert json.loads(run("kv", "counter", "run-1", "stats", "--json").stdout)["items"] == [
        {"key": "rows", "value": 42}
    ]


def test_dead_events_listed_and_redriven(run: Run, filled: tuple[str, Sample]) -> None:
    url, _ = filled
    [dead] = json.loads(run("events", "dead", "--json").stdout)["items"]
    assert (dead["session"], dead["id"], dead["last_error"]) == ("chat-1", "t1", "search backend down")
    assert json.loads(run("events", "dead", "chat-1", "--json").stdout)["items"][0]["id"] == "t1"
    refused = run("events", "redrive", "chat-1", ok=False)
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert json.loads(run("events", "dead", "--json").stdout)["items"] != []
    assert json.loads(run("events", "redrive", "chat-1", "--yes", "--json").stdout) == {"moved": 1}
    assert json.loads(run("events", "dead", "--json").stdout)["items"] == []
    with durastate.open(url) as store:
        assert store.events.get("chat-1", dead["index"]).failed_at is None  # type: ignore[union-attr]


def test_records_documents_listing(shared_url: str) -> None:
    with durastate.open(shared_url) as store:
        conv = store.records.mint_id()
        ids = [store.records.mint_id() for _ in range(3)]
        store.records.commit([{"type": "conversation", "value": {"id": conv}}])
        for n, i in enumerate(ids):
            scope = {"kind": "conversation", "conversationId": conv}
            record = {"id": i, "kind": "note", "key": f"n{n}", "scope": scope}
            content = {"kind": "base", "version": 1, "value": {"n": n}}
            store.records.commit([{"type": "document.create", "record": record, "content": content}])
    listed = cli_here(shared_url, "records", "documents", "--conversation", str(conv), "--json")
    assert listed.returncode == 0, listed.stderr
    assert [d["id"] for d in json.loads(listed.stdout)["items"]] == ids
    assert walk(shared_url, "records", "documents", "--conversation", str(conv), limit=2, field="id") == ids


def test_maintain_dry_run_writes_nothing(run: Run) -> None:
    before = json.loads(run("stats", "--json").stdout)["tables"]
    report = json.loads(run("maintain", "--dead-older-than", "0", "--dry-run", "--json").stdout)
    assert report["dry_run"] is True and report["dead_letters"] == 1 and report["bytes_returned"] is None
    assert json.loads(run("stats", "--json").stdout)["tables"] == before
    assert json.loads(run("queue", "stats", "fragile", "--json").stdout)["dead"] == 1
    assert run("maintain", "--dry-run", "--vacuum", ok=False).returncode == 2


def test_tables_cut_long_values_and_say_how_long_while_json_keeps_them_whole(tmp_path: Path) -> None:
    """A 1 MiB value in `kv scan` is a cell of CELL_LIMIT bytes and a marker with its length, plus a note on
    stderr naming `kv get` and --json; a cut never splits a UTF-8 character; --json prints every byte."""
    from durastate.cli._common import CELL_LIMIT

    path = tmp_path / "s.db"
    big = b"x" * (1024 * 1024)
    accented = b"a" + "é".encode() * 100  # the 120th byte is the first of an é: the cut keeps 119
    with durastate.open(path) as store:
        store.kv.put(b"s", b"n", b"big", big)
        store.kv.put(b"s", b"n", b"accented", accented)
        store.queues.push("q", [big])
    url = f"sqlite://{path}"
    table = cli_here(url, "kv", "scan", "s", "n")
    assert table.returncode == 0
    assert len(table.stdout) < 4096
    assert b"x" * CELL_LIMIT in table.stdout and b"x" * (CELL_LIMIT + 1) not in table.stdout
    assert f"[cut: {len(big):,} bytes in all]".encode() in table.stdout
    assert b"a" + "é".encode() * 59 + b" \xe2\x80\xa6[cut: 201 bytes" in table.stdout
    assert b"kv get SCOPE NS KEY" in table.stderr and b"--json" in table.stderr
    whole = json.loads(cli_here(url, "kv", "scan", "s", "n", "--json").stdout)
    assert {i["key"]: i["value"] for i in whole["items"]}["big"] == big.decode()
    peek = cli_here(url, "queue", "peek", "q")
    assert len(peek.stdout) < 4096 and b"--json" in peek.stderr
    assert json.loads(cli_here(url, "queue", "peek", "q", "--json").stdout)["items"][0]["payload"] == big.decode()
