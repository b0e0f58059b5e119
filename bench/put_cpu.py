"""CPU time of one ``kv.put`` on a SQLite file, against the same upsert run raw (issue 26, pain 10).

    .venv/bin/python bench/put_cpu.py [--puts 20000] [--rounds 7] [--src DIR ...]
    valgrind --tool=callgrind ... bench/put_cpu.py --only kv --puts N   (instructions: see below)

One process, no contention: the CPU a write costs is what bounds the
throughput of many writer processes on few cores (bench/writers.py), so
this is the load-independent figure behind that benchmark. Per path, the
CPU time (``time.process_time``) of ``--puts`` puts of distinct keys with a
100-byte value, on a fresh file each round:

* ``kv``: ``store.kv.put(scope, ns, key, value)``;
* ``engine``: ``store.engine.execute`` of the same compiled upsert;
* ``raw``: ``sqlite3.Connection.execute`` of the same upsert text on the
  store's own table (WAL, ``synchronous=NORMAL``, as durastate's).

Each ``--src`` (a folder holding ``durastate/``; default: this checkout's
``src``) runs in its own worker process; the workers take turns round by
round, paths interleaved within a round, so load elsewhere on the machine
lands on all of them. Reported: the median and range over rounds of
microseconds per put, and ``raw / kv`` (the ceiling of the CPU-bound
throughput ratio in bench/writers.py).

``--only PATH`` runs one path once in this process and prints nothing but
its time: for ``valgrind --tool=callgrind`` (run it with two ``--puts``
counts; the difference of the total instruction counts over the difference
of the counts is the instructions per put, free of start-up).
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _cpu_turns import arguments, run  # noqa: E402  (bench/_cpu_turns.py)

VALUE = b"v" * 100
PATHS = ("kv", "engine", "raw")
RAW_PUT = (
    "INSERT INTO ds_kv (scope, ns, key, value, expires_at) VALUES (?, ?, ?, ?, NULL)"
    " ON CONFLICT (scope, ns, key) DO UPDATE SET value = excluded.value, expires_at = NULL"
)


def _one_path(path_name: str, puts: int) -> float:
    """CPU seconds of ``puts`` puts through ``path_name`` on a fresh store file."""
    import durastate
    from durastate.kv.statements import PUT_PERSISTENT

    with tempfile.TemporaryDirectory() as folder:
        file = os.path.join(folder, "put.db")
        store = durastate.open(file)
        keys = [b"k%d" % i for i in range(puts)]
        try:
            if path_name == "kv":
                put = store.kv.put
                put(b"s", b"ns", b"warm", VALUE)
                start = time.process_time()
                for key in keys:
                    put(b"s", b"ns", key, VALUE)
                return time.process_time() - start
            if path_name == "engine":
                execute = store.engine.execute
                statement = store.engine.sql(PUT_PERSISTENT)
                execute(statement, (b"s", b"ns", b"warm", VALUE))
                start = time.process_time()
                for key in keys:
                    execute(statement, (b"s", b"ns", key, VALUE))
                return time.process_time() - start
            conn = sqlite3.connect(file, isolation_level=None)
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(RAW_PUT, (b"s", b"ns", b"warm", VALUE))
            start = time.process_time()
            for key in keys:
                conn.execute(RAW_PUT, (b"s", b"ns", key, VALUE))
            spent = time.process_time() - start
            conn.close()
            return spent
        finally:
            store.close()


def main() -> None:
    parser = arguments(__doc__, "puts", 20000, PATHS)
    args = parser.parse_args()
    measured = run(__file__, args, args.puts, PATHS, _one_path, str(HERE.parent / "src"))
    if measured is None:
        return
    sources, spent = measured
    print(f"SQLite {sqlite3.sqlite_version}, {args.puts} puts x {args.rounds} rounds, CPU us per put (median, range)")
    for w, src in enumerate(sources):
        for path_name in PATHS:
            values = spent[(w, path_name)]
            print(f"  {src:40s} {path_name:7s} {statistics.median(values):6.2f}  ({min(values):.2f}-{max(values):.2f})")
        ratios = [r / k for r, k in zip(spent[(w, "raw")], spent[(w, "kv")], strict=True)]
        print(f"  {src:40s} raw/kv  {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
