"""Old tree vs new tree: the native benchmarks' ops, interleaved, on CPU time.

    .venv/bin/python bench/compare_trees.py [--old 473d9c3] [--new .] [--rounds 7] [--engines sqlite]

Issue 9's done-when asks for "the native benchmarks (``make bench``,
``bench-documents``, ``bench-events``, ``bench-records``) no worse than
before" the engine-core rewrite; "before" is commit ``473d9c3``. This runs
both libraries side by side on the same ops:

* ``--old`` and ``--new`` name a git revision (extracted with ``git
  archive`` into a temporary folder), ``.`` (this checkout's ``src/``,
  uncommitted changes included; the default for ``--new``) or a folder
  holding a ``src/`` (say, a copy with one change, to attribute a
  difference).
* Each tree gets its own worker process (this file with ``--worker``),
  ``src/`` first on ``sys.path`` (it checks which ``durastate`` it
  imported), its own fresh store (a SQLite file; a fresh PostgreSQL schema
  with ``--engines postgresql``) and the same harness: the kv/queue ops are
  ``bench/run.py``'s own durastate contender with its argument generator;
  the documents, events and records ops are the ones ``bench/documents.py``,
  ``bench/events.py`` and ``bench/records.py`` time, written against the
  public API both trees share. Both workers receive the same commands, so
  they draw the same random arguments.
* ``--rounds`` rounds; in each, every op's batch of calls is cut into
  ``--slices`` slices and the two workers take turns slice by slice (the
  one going first alternating), so a burst of load elsewhere on the
  machine lands on both. Only one worker runs at a time.
* Measured: the worker thread's CPU time (``time.thread_time``) of each
  slice, and its wall time. On SQLite all of the library's work runs in
  that thread, so CPU time is the load-independent measure; on PostgreSQL
  the CPU of the worker's own server processes is added (found by their
  ``application_name``, read from ``/proc/<pid>/schedstat``: see
  ``bench/pg_cpu.py``; wall is printed too, and is noisy on a shared
  machine).
* Reported per op: new/old of the round totals, the median over rounds and
  its range; > 1 means the new tree is slower. ``--control`` runs the new
  tree against itself (two workers of the same tree): its spread is the
  noise floor of the comparison.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pg_cpu import ServerCPU, spent_ns, with_application_name

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_OLD = "473d9c3"
PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/postgres"

# (op, weight): calls per slice are --calls // weight (at least 5).
KV_OPS = [
    ("put 1", 1),
    ("put 100", 20),
    ("get 1", 1),
    ("get 100", 20),
    ("scan 100", 10),
    ("append", 1),
    ("log scan 100", 10),
    ("counter add", 1),
    ("queue push 1", 1),
    ("pop", 1),
    ("claim+ack", 2),
]
OTHER_OPS = [
    ("documents read", 1),
    ("documents write", 1),
    ("documents CAS", 2),
    ("events append", 2),
    ("events claim+complete", 4),
    ("records commit-1", 2),
    ("records commit-10", 4),
    ("records scan-fork-10", 8),
    ("records doc-read-1000", 2),
]
ALL_OPS = KV_OPS + OTHER_OPS

# -- the worker (one per tree) --------------------------------------------------

Runner = Callable[[list[Any]], None]


class Worker:
    """One tree's store and the runners of every op (public API only)."""

    def __init__(self, url: str) -> None:
        import durastate
        from run import Durastate, Workload  # bench/run.py: the kv/queue contender of `make bench`

        self.kv = Durastate(url)  # type: ignore[arg-type]
        self.kv.preload(b"v" * 100)
        self.store: Any = self.kv.store
        self.workload = Workload()
        self.rng = random.Random(7)
        self.ids = iter(range(1_000_000, 10**12))
        self.durastate = durastate
        self._preload()

    def _preload(self) -> None:
        store = self.store
        self.doc_keys = [f"doc/{i:06d}" for i in range(10_000)]
        self.revisions = {}
        for key in self.doc_keys:
            self.revisions[key] = store.documents.write(key, _doc(0))
        store.events.append("a", [{"type": "seed", "payload": 0}])
        r = store.records
        r.commit([{"type": "conversation", "value": {"id": 1}}])
        parent: tuple[int, int] | None = None
        chain_id = 10_000_000
        for _ in range(10):
            conv, entries = chain_id, list(range(chain_id + 1, chain_id + 6))
            chain_id += 6
            value: dict[str, Any] = {"id": conv}
            if parent is not None:
                value["parent"] = {"conversationId": parent[0], "at": parent[1]}
            r.commit([{"type": "conversation", "value": value}] + [_entry(i, conv) for i in entries])
            parent = (conv, entries[-1])
        assert parent is not None
        self.leaf = parent[0]
        body = {f"field{i}": {"n": i, "text": "y" * 40} for i in range(20)}
        self.doc = 20_000_000
        r.commit(
            [
                {
                    "type": "document.create",
                    "record": {"id": self.doc, "kind": "bench", "scope": {"kind": "conversation", "conversationId": 1}},
                    "content": {"kind": "base", "version": 1, "value": body},
                }
            ]
        )
        for i in range(1000):
            r.commit([{"type": "document.change", "id": self.doc, "content": self._delta(i)}])

    def _delta(self, i: int) -> dict[str, Any]:
        """One delta setting a field: Chord ops since 57bb4de, RFC 6902 before (473d9c3)."""
        try:
            from durastate import _chord  # noqa: F401
        except ImportError:
            return {"kind": "delta", "version": 1, "ops": [{"op": "replace", "path": f"/field{i % 20}/n", "value": i}]}
        return {"kind": "delta", "version": 1, "ops": [["s", [f"field{i % 20}", "n"], i]]}

    def prepare(self, op: str, calls: int) -> tuple[Runner, list[Any]]:
        """The op's untimed setup for ``calls`` calls: (timed part, its arguments)."""
        if op in dict(KV_OPS):
            run = self.kv.prepare(op, calls)
            assert run is not None
            return run, self.workload.args(op, calls)
        store, rng = self.store, self.rng
        docs, events, records = store.documents, store.events, store.records
        if op == "documents read":
            keys = [rng.choice(self.doc_keys) for _ in range(calls)]
            return (lambda args: [docs.read(k) for k in args]), keys
        if op == "documents write":
            keys = [rng.choice(self.doc_keys) for _ in range(calls)]

            def write(args: list[Any]) -> None:
                for k in args:
                    self.revisions[k] = docs.write(k, _doc(1))

            return write, keys
        if op == "documents CAS":
            keys = [rng.choice(self.doc_keys) for _ in range(calls)]

            def cas(args: list[Any]) -> None:
                for k in args:
                    self.revisions[k] = docs.write(k, _doc(2), expect=self.revisions[k])

            return cas, keys
        if op == "events append":
            return (lambda args: [events.append("a", [{"type": "t", "payload": {"n": 1}}]) for _ in args]), [
                None
            ] * calls
        if op == "events claim+complete":
            events.append("c", [{"type": "t", "payload": {"n": i}} for i in range(calls)])

            def cycle(args: list[Any]) -> None:
                for _ in args:
                    (e,) = events.claim_available("c", "w", ttl_ms=60_000, limit=1).events
                    events.complete_attempt("c", e.index, e.attempt_count)

            return cycle, [None] * calls
        if op.startswith("records commit-"):
            size = int(op.rsplit("-", 1)[1])
            batches = [[_entry(next(self.ids), 1) for _ in range(size)] for _ in range(calls)]
            return (lambda args: [records.commit(b) for b in args]), batches
        if op == "records scan-fork-10":
            return (lambda args: [records.scan_entries({"conversationId": self.leaf}, 50) for _ in args]), [
                None
            ] * calls
        if op == "records doc-read-1000":
            return (lambda args: [records.document(self.doc) for _ in args]), [None] * calls
        raise SystemExit(f"unknown op {op!r}")

    def run(self, op: str, calls: int) -> dict[str, float]:
        run, args = self.prepare(op, calls)
        gc.collect()
        gc.disable()
        try:
            cpu, wall = time.thread_time(), time.perf_counter()
            run(args)
            return {"cpu": time.thread_time() - cpu, "wall": time.perf_counter() - wall}
        finally:
            gc.enable()

    def close(self) -> None:
        self.kv.close()


def _doc(step: int) -> dict[str, Any]:
    return {"step": step, "owner": "worker-7", "items": list(range(10)), "note": "x" * 40}


def _entry(id: int, conversation_id: int) -> dict[str, Any]:
    return {"type": "entry", "value": {"id": id, "conversationId": conversation_id, "role": "user", "text": "x" * 80}}


def worker_main(src: str, url: str) -> None:
    sys.path.insert(0, src)
    import durastate

    where = Path(durastate.__file__).resolve()
    if not where.is_relative_to(Path(src).resolve()):
        raise SystemExit(f"worker for {src} imported durastate from {where}")
    worker = Worker(url)
    print(json.dumps({"ready": str(where.parent)}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if command["cmd"] == "run":
            print(json.dumps(worker.run(command["op"], command["calls"])), flush=True)
        elif command["cmd"] == "quit":
            break
    worker.close()


# -- the parent -----------------------------------------------------------------


class Tree:
    """A worker process running one tree's ``durastate``."""

    def __init__(self, label: str, src: Path, url: str, server: Any = None) -> None:
        self.label = label
        # PostgreSQL: the worker's server processes, by its application_name.
        self.server = server
        self.app = f"compare-trees-{label}"
        if server is not None:
            url = with_application_name(url, self.app)
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker", str(src), "--url", url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=str(HERE),
        )
        self.ready = self._read()["ready"]

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"{self.label} worker exited (code {self.proc.wait()})")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def run(self, op: str, calls: int) -> dict[str, float]:
        """The worker's thread CPU and wall time for ``calls`` calls (plus its server processes' CPU)."""
        assert self.proc.stdin is not None
        before = self.server.ns(self.app) if self.server is not None else {}
        self.proc.stdin.write(json.dumps({"cmd": "run", "op": op, "calls": calls}) + "\n")
        self.proc.stdin.flush()
        got = self._read()
        if self.server is not None:
            got["cpu"] += spent_ns(before, self.server.ns(self.app)) / 1e9
        return got

    def close(self) -> None:
        if self.proc.stdin is not None and self.proc.poll() is None:
            self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
            self.proc.stdin.flush()
        self.proc.wait(timeout=60)


def extract(rev: str, into: Path) -> Path:
    """``src/`` of git revision ``rev`` (``.``: this checkout's own; a folder: its ``src/``) as a folder."""
    if rev == ".":
        return ROOT / "src"
    if Path(rev).is_dir():
        return Path(rev).resolve() / "src"
    archive = into / f"{rev}.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], stdout=out, check=True)
    target = into / rev
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    return target / "src"


def describe(rev: str) -> str:
    if rev != "." and Path(rev).is_dir():
        return f"the tree in {rev}"
    if rev == ".":
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "src"], capture_output=True, text=True)
        return f"this checkout ({head.stdout.strip()}{'+changes' if dirty.stdout.strip() else ''})"
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", rev], capture_output=True, text=True)
    return out.stdout.strip() or rev


def compare(old: Tree, new: Tree, ops: list[tuple[str, int]], rounds: int, slices: int, calls: int) -> list[str]:
    trees = (old, new)
    totals: dict[tuple[str, str], list[dict[str, float]]] = {}
    for op, weight in ops:  # warm-up: every op once on each side, untimed
        for tree in trees:
            tree.run(op, max(5, calls // weight // 4))
    turn = 0
    for r in range(rounds):
        for op, weight in ops:
            n = max(5, calls // weight)
            spent = {tree.label: {"cpu": 0.0, "wall": 0.0} for tree in trees}
            for _ in range(slices):
                turn += 1
                for tree in trees if turn % 2 else trees[::-1]:
                    got = tree.run(op, max(1, n // slices))
                    spent[tree.label]["cpu"] += got["cpu"]
                    spent[tree.label]["wall"] += got["wall"]
            for label, value in spent.items():
                totals.setdefault((op, label), []).append(value)
        print(f"  round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    lines = [
        f"{'op':<24}{'old CPU us':>11}{'new CPU us':>11}{'new/old CPU':>12}{'range':>13}{'new/old wall':>13}",
    ]
    for op, weight in ops:
        n = max(1, max(5, calls // weight) // slices) * slices
        a, b = totals[(op, old.label)], totals[(op, new.label)]
        cpu = [y["cpu"] / x["cpu"] for x, y in zip(a, b, strict=True)]
        wall = [y["wall"] / x["wall"] for x, y in zip(a, b, strict=True)]
        old_us = statistics.median(x["cpu"] for x in a) / n * 1e6
        new_us = statistics.median(y["cpu"] for y in b) / n * 1e6
        lines.append(
            f"{op:<24}{old_us:>11.1f}{new_us:>11.1f}{statistics.median(cpu):>12.3f}"
            f"{min(cpu):>7.2f}-{max(cpu):<5.2f}{statistics.median(wall):>13.3f}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", default=DEFAULT_OLD, help=f"git revision or '.' (default {DEFAULT_OLD})")
    parser.add_argument("--new", default=".", help="git revision or '.' (default: this checkout)")
    parser.add_argument("--control", action="store_true", help="compare --new with itself (the noise floor)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--slices", type=int, default=4)
    parser.add_argument("--calls", type=int, default=800, help="calls per round of a weight-1 op (default 800)")
    parser.add_argument("--engines", default="sqlite", help="sqlite, postgresql or both (comma-separated)")
    parser.add_argument("--only", action="append", help="run only these ops (repeatable)")
    parser.add_argument("--postgres-url", default=os.environ.get("DURASTATE_BENCH_POSTGRES_URL", PG_DEFAULT))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker_main(args.worker, args.url)
        return
    ops = [(op, w) for op, w in ALL_OPS if not args.only or op in args.only]
    old_rev = args.new if args.control else args.old
    print(
        f"bench/compare_trees.py --old {old_rev} --new {args.new} --rounds {args.rounds} --slices {args.slices}"
        f" --calls {args.calls}; old = {describe(old_rev)}, new = {describe(args.new)};"
        f" python {sys.version.split()[0]}, {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f} at start"
    )
    with tempfile.TemporaryDirectory() as folder:
        old_src = extract(old_rev, Path(folder))
        new_src = extract(args.new, Path(folder)) if args.new != old_rev else old_src
        for engine in args.engines.split(","):
            cleanup: list[Callable[[], None]] = []
            server = None
            if engine == "postgresql":
                sys.path.insert(0, str(ROOT / "src"))
                from durastate.testing.postgres_server import create_schema, drop_schema

                server = ServerCPU(args.postgres_url)
                cleanup.append(server.close)

                (old_url, a), (new_url, b) = create_schema(args.postgres_url), create_schema(args.postgres_url)
                cleanup += [
                    lambda a=a: drop_schema(args.postgres_url, a),
                    lambda b=b: drop_schema(args.postgres_url, b),
                ]
            else:
                old_url, new_url = str(Path(folder) / "old.db"), str(Path(folder) / "new.db")
            try:
                old = Tree("old", old_src, old_url, server)
                new = Tree("new", new_src, new_url, server)
                print(f"\n== {engine} ==  old: {old.ready}  new: {new.ready}")
                try:
                    for line in compare(old, new, ops, args.rounds, args.slices, args.calls):
                        print(line, flush=True)
                finally:
                    old.close()
                    new.close()
            finally:
                for step in cleanup:
                    step()


if __name__ == "__main__":
    main()
