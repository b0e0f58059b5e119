"""How much of a saver call's CPU is its SQL: LangGraph's sync savers and pydantic-ai's ``write_record`` (kvlayout).

    .venv/bin/python bench/sql_share.py [--calls 300] [--rounds 3] [--kv-rowid]

Each side's statements are recorded while the bench's ops run (a
``sqlite3.Cursor`` subclass on the connection, on durastate's per-thread
cursor and on the peer's connection), with the CPU time of the ops
(``time.process_time``, all on this thread); then the recorded statements,
with their parameters, are replayed on a copy of the file as it was before
the ops, through one plain ``sqlite3`` cursor (statements cached): that is
the SQL's CPU on that layout, without any Python around it. "other" is the
rest: the library's Python, serialisation, the bench's own argument
building (the same on both sides). The peer's connection replays with
Python's implicit transactions and its commits where it committed; durastate's
in autocommit with its own BEGIN/COMMIT, as each ran.

Sides: ``DurastateSaver`` vs ``SqliteSaver`` (bench/langgraph.py's ``put``,
``put_writes``, ``get_tuple(latest)``, 100 checkpoints preloaded), and
``DurastateConversationStore`` vs bench/pydantic_ai_conversations.py's
plain-sqlite3 anchor (a turn of 2 entries saved). ``--kv-rowid``: durastate's
``ds_kv`` rebuilt as a rowid table (the layout kvlayout measured and did not
adopt) before the ops. Reported: median over rounds of us per call.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# Run as a script, this folder comes first on sys.path, and bench/langgraph.py would shadow the package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]

import durastate  # noqa: E402

ROWID_KV = (
    "BEGIN; CREATE TABLE ds_kv_new (scope BLOB NOT NULL, ns BLOB NOT NULL, key BLOB NOT NULL,"
    " value BLOB NOT NULL, expires_at INTEGER, PRIMARY KEY (scope, ns, key));"
    " INSERT INTO ds_kv_new SELECT scope, ns, key, value, expires_at FROM ds_kv; DROP TABLE ds_kv;"
    " ALTER TABLE ds_kv_new RENAME TO ds_kv;"
    " CREATE INDEX ds_kv_expiry ON ds_kv (expires_at) WHERE expires_at IS NOT NULL; COMMIT"
)

# The statements of the ops being timed: (kind, sql, parameters); kind "x" execute, "m" executemany, "c" commit.
LOG: list[tuple[str, str, Any]] | None = None


class Recording(sqlite3.Cursor):
    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        if LOG is not None:
            LOG.append(("x", sql, parameters))
        return super().execute(sql, parameters)

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> sqlite3.Cursor:
        rows = list(seq_of_parameters)
        if LOG is not None:
            LOG.append(("m", sql, rows))
        return super().executemany(sql, rows)


class RecordingConnection(sqlite3.Connection):
    def cursor(self, factory: Any = Recording) -> Any:
        return super().cursor(factory)

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> sqlite3.Cursor:
        return self.cursor().executemany(sql, seq_of_parameters)

    def commit(self) -> None:
        if LOG is not None:
            LOG.append(("c", "", None))
        super().commit()


def _module(file: str, name: str) -> Any:
    """A sibling bench script as a module (under another name: bench/langgraph.py is not the package)."""
    spec = importlib.util.spec_from_file_location(name, HERE / f"{file}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _durastate(path: Path, rowid: bool) -> durastate.Store:
    durastate.open(path).close()
    if rowid:
        conn = sqlite3.connect(path, isolation_level=None)
        conn.executescript(ROWID_KV)
        conn.close()
    return durastate.open(path)


def _recording_cursor(store: durastate.Store) -> None:
    """Make the engine's per-thread cursor (this thread) a recording one."""
    engine: Any = store.engine
    engine._tls.state.cursor = Recording(engine._thread_connection())


def _copy(path: Path, to: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{to}{suffix}").unlink(missing_ok=True)
    for suffix in ("", "-wal"):
        if Path(f"{path}{suffix}").exists():
            shutil.copy(f"{path}{suffix}", f"{to}{suffix}")


def measure(run: Callable[[], None], path: Path, folder: Path, calls: int, autocommit: bool) -> tuple[float, float]:
    """(CPU us per call of ``run``, CPU us per call of its statements replayed raw)."""
    global LOG
    base = folder / "before.db"
    _copy(path, base)
    LOG = []
    gc.disable()
    started = time.process_time()
    run()
    total = time.process_time() - started
    gc.enable()
    log, LOG = LOG, None
    work = folder / "replay.db"
    _copy(base, work)
    conn = sqlite3.connect(work, isolation_level=None if autocommit else "", cached_statements=512)
    conn.execute("PRAGMA synchronous=NORMAL")
    cursor = conn.cursor()
    gc.disable()
    started = time.process_time()
    for kind, sql, parameters in log:
        if kind == "x":
            cursor.execute(sql, parameters).fetchall()
        elif kind == "m":
            cursor.executemany(sql, parameters)
        else:
            conn.commit()
    replayed = time.process_time() - started
    gc.enable()
    conn.close()
    return total / calls * 1e6, replayed / calls * 1e6


def langgraph(folder: Path, calls: int, rounds: int, rowid: bool) -> dict[str, list[tuple[float, float]]]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    from durastate.integrations.langgraph import DurastateSaver

    bench = _module("langgraph", "bench_langgraph")
    ours_path, theirs_path = folder / "durastate.db", folder / "langgraph.db"
    ours = DurastateSaver(_durastate(ours_path, rowid))
    conn = sqlite3.connect(theirs_path, check_same_thread=False, factory=RecordingConnection)
    theirs = SqliteSaver(conn)
    theirs.setup()
    conn.execute("PRAGMA synchronous=NORMAL")
    ops = {"durastate": bench.sync_ops(ours, 100, calls), "SqliteSaver": bench.sync_ops(theirs, 100, calls)}
    _recording_cursor(ours.store)
    paths = {"durastate": ours_path, "SqliteSaver": theirs_path}
    out: dict[str, list[tuple[float, float]]] = {}
    for op in ("put", "put_writes", "get_tuple(latest)"):
        for side in ops:
            ops[side][op]()  # warm-up
        for _ in range(rounds):
            for side in ops:
                key = f"{op}, {side}"
                out.setdefault(key, []).append(
                    measure(ops[side][op], paths[side], folder, calls, autocommit=side == "durastate")
                )
    ours.close()
    conn.close()
    return out


def pydantic_ai(folder: Path, calls: int, rounds: int, rowid: bool) -> dict[str, list[tuple[float, float]]]:
    from durastate.integrations.pydantic_ai import DurastateConversationStore

    bench = _module("pydantic_ai_conversations", "bench_pydantic_ai_conversations")
    ours_path, plain_path = folder / "pydantic_durastate.db", folder / "pydantic_plain.db"
    ours = DurastateConversationStore(store=_durastate(ours_path, rowid))
    plain = bench.SqliteConversationStore(plain_path, "NORMAL")
    plain.db.close()
    plain.db = sqlite3.connect(plain_path, isolation_level=None, check_same_thread=False, factory=RecordingConnection)
    plain.db.execute("PRAGMA synchronous=NORMAL")
    writers = {"durastate": bench.Writer(ours, "c"), "sqlite3 anchor": bench.Writer(plain, "c")}
    paths = {"durastate": ours_path, "sqlite3 anchor": plain_path}

    def saves(writer: Any, n: int) -> Callable[[], None]:
        async def go() -> None:
            for _ in range(n):
                await writer.save_turn()

        return lambda: asyncio.run(go())

    for writer in writers.values():
        saves(writer, 100)()
    _recording_cursor(ours.store)
    out: dict[str, list[tuple[float, float]]] = {}
    for _ in range(rounds):
        for side, writer in writers.items():
            out.setdefault(f"write_record, {side}", []).append(
                measure(saves(writer, calls), paths[side], folder, calls, autocommit=True)
            )
    ours.store.close()
    plain.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kv-rowid", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-sql-share-") as name:
        folder = Path(name)
        rows = {
            **langgraph(folder, args.calls, args.rounds, args.kv_rowid),
            **pydantic_ai(folder, args.calls, args.rounds, args.kv_rowid),
        }
    layout = "rowid ds_kv" if args.kv_rowid else "ds_kv as the engine makes it"
    print(
        f"# bench/sql_share.py --calls {args.calls} --rounds {args.rounds} ({layout}); sqlite {sqlite3.sqlite_version}"
    )
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; CPU us per call, median over rounds")
    print("| op, side | all | SQL alone (range) | other |")
    print("|---|---|---|---|")
    for key, values in rows.items():
        total = statistics.median(v[0] for v in values)
        sql = [v[1] for v in values]
        print(
            f"| {key} | {total:.1f} | {statistics.median(sql):.1f} ({min(sql):.1f}-{max(sql):.1f}) "
            f"| {statistics.median(v[0] - v[1] for v in values):.1f} |"
        )


if __name__ == "__main__":
    main()
