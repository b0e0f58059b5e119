"""What each facet's common writes send from a Citus coordinator to its workers, in the Citus mode.

    .venv/bin/python bench/citus_remote_commands.py [--url postgresql://postgres@127.0.0.1:9700/postgres] [-v]

Opens a store in a fresh distributed schema on the coordinator (``citus.enable_schema_based_sharding`` on) with
one pooled connection, on which Citus logs every command it sends to a worker (``citus.log_remote_commands``).
Each write runs three times, then once more, measured: its wall time (one call: an indication, not a benchmark),
the number of commands the coordinator issued or ran for it, and two flags: ``2PC`` (a PREPARE TRANSACTION: the
write was committed in two phases) and ``INTERMEDIATE`` (rows pulled to the coordinator and copied back: a
statement Citus did not route whole to one worker). ``-v`` prints a flagged write's commands. A store's tables
live in one distributed schema, so no write here needs either.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import durastate
from durastate.testing import postgres_server


def writes(store: durastate.Store) -> dict[str, Callable[[], object]]:
    """The writes surveyed, each repeatable (what it consumes, it makes first)."""
    kv, queues, documents, events, presence = store.kv, store.queues, store.documents, store.events, store.presence

    def claimed() -> Any:
        claim = queues.claim("jobs")
        assert claim is not None
        return claim

    def document_revision(key: str) -> int:
        found = documents.read(key)
        return 0 if found is None else found.revision

    return {
        "kv.put": lambda: kv.put(b"s", b"n", b"k", b"v"),
        "kv.put_if_absent": lambda: kv.put_if_absent(b"s", b"n", b"k2", b"v"),
        "kv.put_many (3)": lambda: kv.put_many(b"s", b"n", [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]),
        "kv.append": lambda: kv.append(b"s", b"n", b"log", b"x"),
        "kv.incr": lambda: kv.incr(b"s", b"n", b"c"),
        "kv.set_counter": lambda: kv.set_counter(b"s", b"n", b"c2", 5),
        "kv.put + kv.take": lambda: (kv.put(b"s", b"t", b"x", b"1"), kv.take(b"s", b"t", b"x")),
        "kv.put + kv.take_first": lambda: (kv.put(b"s", b"t", b"x", b"1"), kv.take_first(b"s", b"t")),
        "kv.put + kv.drain": lambda: (kv.put(b"s", b"t", b"x", b"1"), kv.drain(b"s", b"t")),
        "kv.delete": lambda: kv.delete(b"s", b"n", [b"a"]),
        "kv.trim_log": lambda: kv.trim_log(b"s", b"n", b"log", keep_last=5),
        "queues.push": lambda: queues.push("jobs", [b"a"]),
        "queues.pop": lambda: queues.pop("jobs"),
        "queues.claim + ack": lambda: claimed().ack(),
        "queues.claim + nack": lambda: claimed().nack(),
        "documents.write": lambda: documents.write("doc", {"a": 2}),
        "documents.read + write(expect=)": lambda: documents.write("doc2", {"a": 2}, expect=document_revision("doc2")),
        "documents.write + delete": lambda: (documents.write("gone", {}), documents.delete("gone")),
        "records.mint_id": lambda: store.records.mint_id(),
        "events.append (1)": lambda: events.append("sess", [{"type": "t"}]),
        "events.append (2)": lambda: events.append("sess", [{"type": "t"}, {"type": "u"}]),
        "presence.set": lambda: presence.set(
            "ns", "p1", {"x": 1}, at_ms=int(time.time() * 1000), seen=1, ttl_ms=60_000
        ),
        "presence.remove": lambda: presence.remove("ns", "p1"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:9700/postgres")
    parser.add_argument("-v", "--verbose", action="store_true", help="print a flagged write's commands")
    args = parser.parse_args()
    url, schema = postgres_server.create_schema(args.url)
    remote: list[str] = []
    try:
        with durastate.open(postgres_server.as_citus(url), min_connections=1, max_connections=1) as store:
            store.queues.push("jobs", [b"job"] * 50)
            store.kv.append(b"s", b"n", b"log", b"x")
            store.events.append("sess", [{"type": "t"}])
            pool = store.engine._pool  # type: ignore[attr-defined]  # its one connection, logging from here on
            conn = pool.getconn()
            conn.execute("SET citus.log_remote_commands = on")
            conn.execute("SET client_min_messages = log")
            conn.add_notice_handler(lambda diag: remote.append(diag.message_primary or ""))
            pool.putconn(conn)
            print(f"{'write':34} {'ms':>6} {'cmds':>4}  flags")
            for name, write in writes(store).items():
                for _ in range(3):
                    write()
                remote.clear()
                started = time.perf_counter()
                write()
                ms = (time.perf_counter() - started) * 1000
                sent = [line for line in remote if line.startswith(("issuing", "executing"))]
                flags = ["2PC"] if any("PREPARE TRANSACTION" in line for line in sent) else []
                if any("intermediate" in line or line.startswith("issuing COPY") for line in sent):
                    flags.append("INTERMEDIATE")
                print(f"{name:34} {ms:6.2f} {len(sent):4}  {' '.join(flags)}")
                if flags and args.verbose:
                    for line in sent:
                        print("      ", line[:200])
    finally:
        postgres_server.drop_schema(args.url, schema)


if __name__ == "__main__":
    main()
