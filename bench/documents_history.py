"""What document revision history costs: history off (the default) and on, against a baseline.

Run it with ``make bench-documents-history`` (or ``.venv/bin/python
bench/documents_history.py --help``).

Contenders, each a ``durastate.open()`` of its own fresh SQLite file (or its
own table prefix on ``--url``'s PostgreSQL), same documents as
``bench/documents.py`` (about 220 bytes compact, random keys among
``PRELOAD``):

* ``baseline`` (with ``--baseline REV``, e.g. ``main``): the documents
  facet as it is at git revision REV (``git show REV:src/durastate/documents.py``
  loaded as a module beside this tree's), on the same engine: the
  yardstick for "the default path did not get slower".
* ``off``: this tree's facet with the default policy (no history).
* ``on``: this tree's facet with ``Retention(document_history=--keep)``:
  each write also records its revision and trims the document's history.

Ops: ``read``, ``write`` (unconditional), ``cas write`` (``expect=`` the
current revision), ``lock(read+write)``. Each contender's history is warmed
to its steady state first (every key written more than ``--keep`` times), so
every timed write of ``on`` also deletes one row.

Method: one untimed warm-up round sizes each op's batch to about
``--batch-ms`` of ``off``'s time; then ``--rounds`` rounds, each op once per
contender, back to back, in an order that rotates from round to round.
Timed by ``time.process_time()`` (CPU of this process: SQLite works
in-process, so this is its cost, free of the other jobs on a shared
machine) and, for reference, ``time.perf_counter()``. Reported: the median
of the per-round ratios against ``off`` (paired, so drift cancels) with their
range. On PostgreSQL the server's work is not in this process's CPU time:
read the wall-clock ratios there.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import platform
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import durastate
from documents import PRELOAD, Durastate, doc_of, key_of  # bench/documents.py: the same documents and ops

OPS = ["read", "write", "cas write", "lock(read+write)"]
Runner = Callable[[list[int]], None]


def baseline_module(revision: str) -> ModuleType:
    """The documents facet's module at git ``revision``, importable beside this tree's (its relative imports resolve).

    ``src/durastate/documents.py`` before documents became a package,
    ``documents/facet.py`` since (its ``from . import history`` then resolves
    to this tree's history module).
    """
    root = Path(__file__).resolve().parents[1]
    places = {"documents.py": "durastate._documents_baseline", "documents/facet.py": "durastate.documents._baseline"}
    for file in places:
        shown = subprocess.run(
            ["git", "show", f"{revision}:src/durastate/{file}"], cwd=root, capture_output=True, text=True
        )
        if shown.returncode == 0:
            source, name = shown.stdout, places[file]
            break
    else:
        raise SystemExit(f"no documents facet at {revision}")
    folder = Path(tempfile.mkdtemp(prefix="durastate-baseline-"))
    path = folder / "_documents_baseline.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class Contender:
    def __init__(self, name: str, store: durastate.Store, docs: Any, count: int, warm_writes: int) -> None:
        self.name = name
        self.store = store
        self.docs = docs
        self.revisions: dict[int, int] = {}
        with store.transaction():
            for i in range(count):
                for step in range(warm_writes):
                    self.revisions[i] = docs.write(key_of(i), doc_of(i, step))

    # The ops are bench/documents.py's own (the same calls on self.docs / self.revisions).
    runner = Durastate.runner


def timed(run: Runner, keys: list[int]) -> tuple[float, float]:
    gc.collect()
    gc.disable()
    try:
        cpu, wall = time.process_time(), time.perf_counter()
        run(keys)
        return time.process_time() - cpu, time.perf_counter() - wall
    finally:
        gc.enable()


Series = dict[tuple[str, str], list[float]]


def measure(
    args: argparse.Namespace, open_store: Callable[..., durastate.Store]
) -> tuple[list[str], Series, Series, Series]:
    """Fill the contenders and run the rounds: (names, CPU us per call, CPU ratios, wall ratios)."""
    base_module = baseline_module(args.baseline) if args.baseline else None
    warm = args.keep + 1  # every key past its history bound: each timed 'on' write also trims
    contenders: list[Contender] = []
    try:
        if base_module is not None:
            base = open_store("base")
            contenders.append(Contender("baseline", base, base_module.Documents(base.engine), args.docs, warm))
        off = open_store("off")
        contenders.append(Contender("off", off, off.documents, args.docs, warm))
        on = open_store("on", retention=durastate.Retention(document_history=args.keep))
        contenders.append(Contender("on", on, on.documents, args.docs, warm))
        reference = next(c for c in contenders if c.name == "off")
        rng = random.Random(20240601)
        sizes: dict[str, int] = {}
        for op in args.ops:  # warm-up: size each op's batch to about --batch-ms of 'off'
            trial = [rng.randrange(args.docs) for _ in range(300)]
            for c in contenders:
                timed(c.runner(op), trial)
            per_call = timed(reference.runner(op), trial)[0] / len(trial)
            sizes[op] = max(200, int(args.batch_ms / 1000 / max(per_call, 1e-7)))
        per_call_us: Series = {}
        cpu_ratios: Series = {}
        wall_ratios: Series = {}
        for r in range(args.rounds):
            for op in args.ops:
                keys = [rng.randrange(args.docs) for _ in range(sizes[op])]
                order = contenders[r % len(contenders) :] + contenders[: r % len(contenders)]
                got = {c.name: timed(c.runner(op), keys) for c in order}
                for c in contenders:
                    cpu, wall = got[c.name]
                    per_call_us.setdefault((op, c.name), []).append(cpu / len(keys) * 1e6)
                    cpu_ratios.setdefault((op, c.name), []).append(cpu / got["off"][0])
                    wall_ratios.setdefault((op, c.name), []).append(wall / got["off"][1])
    finally:
        for c in contenders:
            c.store.close()
    return [c.name for c in contenders], per_call_us, cpu_ratios, wall_ratios


def report(args: argparse.Namespace, names: list[str], per_call_us: Series, cpu: Series, wall: Series) -> None:
    engine = "PostgreSQL" if args.url else f"SQLite {sqlite3.sqlite_version}"
    print(f"document revision history cost; {engine}, python {platform.python_version()}, {os.cpu_count()} cpus")
    print(
        f"{args.rounds} rounds, {args.docs} documents, history keep={args.keep}"
        + (f", baseline = {args.baseline}" if args.baseline else "")
    )
    print("time per call relative to 'off' (median of paired rounds, range); > 1 is slower")
    others = [n for n in names if n != "off"]
    header = f"{'op':<18}" + "".join(f"{n + ' cpu us':>14}" for n in names)
    header += "".join(f"{n + ' cpu/off':>24}" for n in others) + "".join(f"{n + ' wall/off':>24}" for n in others)
    print(header)
    for op in args.ops:
        line = f"{op:<18}" + "".join(f"{statistics.median(per_call_us[(op, n)]):>14.1f}" for n in names)
        for table in (cpu, wall):
            for n in others:
                rs = table[(op, n)]
                line += f"{statistics.median(rs):>10.3f}x ({min(rs):.2f}-{max(rs):.2f})".rjust(24)
        print(line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--batch-ms", type=float, default=150.0, help="CPU time of 'off' per timed batch")
    parser.add_argument("--keep", type=int, default=10, help="document_history of the 'on' contender")
    parser.add_argument("--baseline", default=None, metavar="REV", help="also time the facet at this git revision")
    parser.add_argument("--url", default=None, help="a PostgreSQL server (default: SQLite files in a temporary folder)")
    parser.add_argument("--docs", type=int, default=PRELOAD, help="documents per contender")
    parser.add_argument("--ops", nargs="*", default=OPS, choices=OPS)
    args = parser.parse_args()

    if args.url is None:
        with tempfile.TemporaryDirectory(prefix="durastate-bench-history-") as folder:
            results = measure(args, lambda name, **options: durastate.open(Path(folder) / f"{name}.db", **options))
    else:
        from durastate.testing import postgres_server

        schema_url, schema = postgres_server.create_schema(args.url)  # dropped after: nobody else's
        try:
            results = measure(args, lambda name, **options: durastate.open(schema_url, prefix=f"{name}_", **options))
        finally:
            postgres_server.drop_schema(args.url, schema)
    report(args, *results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
