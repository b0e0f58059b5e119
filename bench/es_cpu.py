"""CPU of an eventsourcing insert on SQLite: durastate's recorder (per tree) against eventsourcing's own.

    .venv/bin/python bench/es_cpu.py [--inserts 400] [--rounds 7] [--src DIR ...]
    valgrind --tool=callgrind --separate-threads=yes ... bench/es_cpu.py --only insert10 --inserts N

What ``bench/integrations.py`` times as "es insert 1 event" and "es insert 10
events" (a fresh uuid per insert, 200-byte state, topic ``"topic"``), as CPU
time instead of wall time: on SQLite all of an insert's work runs in the
calling thread, so its CPU time is the load-independent figure (the fsync's
wait is not CPU). Paths:

* ``insert1`` / ``insert10``: ``DurastateApplicationRecorder.insert_events``
  on a fresh ``durability="full"`` file (the peer's ``synchronous=FULL``);
* ``peer1`` / ``peer10``: eventsourcing's ``SQLiteApplicationRecorder`` on a
  fresh file, built by its factory with default settings.

Each store first takes 20 aggregates of 10 events (as the benchmark's
setup) and 200 warm-up inserts, then the timed ``--inserts``. Each
``--src`` (a folder holding ``durastate/``; default: this checkout's
``src``) runs in its own worker process; the workers take turns round by
round, paths interleaved within a round (bench/_cpu_turns.py). Reported:
the median and range over rounds of microseconds per insert, and
peer/durastate (> 1: durastate cheaper).

``--only PATH`` runs one path once in this process and prints its time:
for callgrind (run it with two ``--inserts`` counts; the difference of the
calling thread's instruction counts over the difference of the counts is
the instructions per insert, free of start-up and setup).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _cpu_turns import arguments, run  # noqa: E402  (bench/_cpu_turns.py)

PAYLOAD = b"x" * 200
PATHS = ("insert1", "insert10", "peer1", "peer10")
WARM_UP = 200


def _recorder(path_name: str, folder: str) -> tuple[Any, Any]:
    """(recorder, closer) of ``path_name`` on a fresh file in ``folder``."""
    if path_name.startswith("peer"):
        from eventsourcing.persistence import InfrastructureFactory

        factory = InfrastructureFactory.construct(
            {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": f"{folder}/es-peer.db"}
        )
        return factory.application_recorder(), factory
    import durastate
    from durastate.integrations.eventsourcing import DurastateApplicationRecorder

    store = durastate.open(f"{folder}/es-durastate.db", durability="full")
    return DurastateApplicationRecorder(store), store


def _one_path(path_name: str, inserts: int) -> float:
    """CPU seconds of ``inserts`` inserts through ``path_name`` on a fresh store file."""
    from eventsourcing.persistence import StoredEvent

    size = 10 if path_name.endswith("10") else 1
    with tempfile.TemporaryDirectory() as folder:
        recorder, closer = _recorder(path_name, folder)
        try:
            insert = recorder.insert_events
            for _ in range(20):
                originator = uuid.uuid4()
                insert([StoredEvent(originator, v, "topic", PAYLOAD) for v in range(10)])
            batches = [
                [StoredEvent(originator, v, "topic", PAYLOAD) for v in range(1, size + 1)]
                for originator in (uuid.uuid4() for _ in range(WARM_UP + inserts))
            ]
            for batch in batches[:WARM_UP]:
                insert(batch)
            start = time.process_time()
            for batch in batches[WARM_UP:]:
                insert(batch)
            return time.process_time() - start
        finally:
            closer.close()


def main() -> None:
    parser = arguments(__doc__, "inserts", 400, PATHS)
    args = parser.parse_args()
    measured = run(__file__, args, args.inserts, PATHS, _one_path, str(HERE.parent / "src"))
    if measured is None:
        return
    sources, spent = measured
    print(f"{args.inserts} inserts x {args.rounds} rounds, CPU us per insert (median, range)")
    for w, src in enumerate(sources):
        for path_name in PATHS:
            values = spent[(w, path_name)]
            print(f"  {src:40s} {path_name:8s} {statistics.median(values):7.1f}  ({min(values):.1f}-{max(values):.1f})")
        for size in ("1", "10"):
            ratios = [p / d for p, d in zip(spent[(w, "peer" + size)], spent[(w, "insert" + size)], strict=True)]
            print(f"  {src:40s} peer/durastate insert{size}: {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
