"""The drop-in adapters against the approaches they replace: compat.vgi and compat.functualize.

Run it with ``make bench-compat`` (or ``.venv/bin/python bench/compat.py --help``).

Pairs, each contender on its own fresh database file in one temporary folder:

* vgi: ``durastate.compat.vgi.FunctionStorage`` (default options) against
  ``bench/vgi_style.py``, vgi's ``FunctionStorageSqlite`` re-created at its
  own defaults. Both are driven through the backend methods exactly as vgi's
  ``BoundStorage`` drives them (``state_get`` is ``state_get_many([key])[0]``,
  ``state_put`` is ``state_put_many([(key, value)])``), on the workload of
  ``bench/run.py`` (10,000 keys and a 10,000-entry log preloaded, 100-byte
  values). A third column, ``raw`` (``--no-raw`` leaves it out), is the
  ceiling: ``bench/run.py``'s raw sqlite3 contender running durastate's own
  compiled statements on a plain connection with no validation, so
  ``raw/seed`` is the best any adapter over today's schema and statements
  could reach.
* functualize: ``durastate.compat.functualize.SQLiteSubstrate`` against
  ``bench/functualize_style.py``, functualize-state-sqlite's substrate
  re-created at its own defaults, on the documents of
  ``bench/documents.py`` (10,000 preloaded, ~300 bytes; keys and documents
  of each call built before the timing). Ops: ``read``,
  ``write`` (unconditional), ``read+CAS write`` (read, then write with
  ``expect=`` the revision read), ``lock+read+write`` (both inside
  ``lock(key)``).

Method: one untimed warm-up batch per op (which also sizes the timed
batches to about ``--batch-ms`` of the seed's time), then ``--rounds``
rounds. Each round's batch is cut into ``--slices`` slices and the two
contenders take turns slice by slice, starting with a different one each
slice, so a noisy moment hits both alike. Both perform the same calls with
the same arguments. Reported: median calls/s of each, and the median over
rounds of the per-round ratio durastate / seed (seed time over durastate
time for the same calls: higher is better) with its range; PASS when the
median meets the target of issue 9.
"""

from __future__ import annotations

import argparse
import gc
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import durastate
from documents import PRELOAD as DOC_PRELOAD
from documents import doc_of
from documents import key_of as doc_key_of
from durastate.compat.functualize import SQLiteSubstrate
from functualize_style import FunctualizeStyleSubstrate
from run import VALUE_SIZE, CompatVgi, RawSqlite, VgiStyle, Workload, statement_texts

Runner = Callable[[list[Any]], None]

# op name in the report -> (op name in bench/run.py, target)
VGI_TARGETS = {
    "put 1": ("put 1", 1.05),
    "put 100": ("put 100", 0.95),
    "get 1": ("get 1", 1.25),
    "get 100": ("get 100", 1.10),
    "scan 100": ("scan 100", 1.20),
    "append": ("append", 1.30),
    "log scan 100": ("log scan 100", 1.15),
    "counter add": ("counter add", 1.05),
    "push 1": ("queue push 1", 1.50),
    "pop": ("pop", 0.95),
}
FUNCTUALIZE_TARGETS = {
    "read": 1.5,
    "write": 5.0,
    "read+CAS write": 3.0,
    "lock+read+write": 5.0,
}


class Substrate:
    """One functualize-shaped substrate (``read`` returns a ``Stored``) driven by the four ops."""

    def __init__(self, name: str, substrate: Any):
        self.name = name
        self.substrate = substrate

    def preload(self) -> None:
        s = self.substrate
        with s.lock("preload"):
            for i in range(DOC_PRELOAD):
                s.write(doc_key_of(i), doc_of(i, 0))

    def prepare(self, op: str, calls: int) -> Runner:
        """The timed part of ``op``; its arguments are ``(key, document)`` pairs built beforehand."""
        s = self.substrate
        if op == "read":

            def run(args: list[tuple[str, dict[str, Any]]]) -> None:
                read = s.read
                for key, _doc in args:
                    read(key)

        elif op == "write":

            def run(args: list[tuple[str, dict[str, Any]]]) -> None:
                write = s.write
                for key, doc in args:
                    write(key, doc)

        elif op == "read+CAS write":

            def run(args: list[tuple[str, dict[str, Any]]]) -> None:
                read, write = s.read, s.write
                for key, doc in args:
                    if not write(key, doc, expect=read(key).revision):
                        raise AssertionError(f"{self.name}: CAS at the revision just read failed")

        else:

            def run(args: list[tuple[str, dict[str, Any]]]) -> None:
                read, write, lock = s.read, s.write, s.lock
                for key, doc in args:
                    with lock(key):
                        doc["step"] = read(key).data["step"] + 1
                        write(key, doc)

        return run

    def close(self) -> None:
        self.substrate.close()


def timed(run: Runner, args: list[Any]) -> tuple[float, float]:
    """Wall time and this thread's CPU time (user + system) of one run."""
    gc.collect()
    cpu = time.thread_time()
    start = time.perf_counter()
    run(args)
    return time.perf_counter() - start, time.thread_time() - cpu


@dataclass
class Samples:
    """One op's measurements, one entry per round, by contender name."""

    rate: dict[str, list[float]] = field(default_factory=dict)  # calls/s (wall-clock)
    wall: dict[str, list[float]] = field(default_factory=dict)  # seed time / this contender's time
    cpu: dict[str, list[float]] = field(default_factory=dict)  # the same by this thread's CPU time


def measure(
    contenders: dict[str, Any],
    ops: dict[str, tuple[str, float]],
    make_args: Callable[[str, int], list[Any]],
    rounds: int,
    slices: int,
    batch_seconds: float,
) -> dict[str, Samples]:
    """Time every op on every contender, ``rounds`` times (see the module docstring).

    ``contenders`` maps names to contenders and must hold ``"seed"``; the
    ratios are the seed's time over each contender's.
    """
    sizes: dict[str, int] = {}
    for label, (op, _target) in ops.items():
        trial = make_args(op, 200)
        for name, contender in contenders.items():
            if name != "seed":
                timed(contender.prepare(op, len(trial)), trial)
        per_call = timed(contenders["seed"].prepare(op, len(trial)), trial)[0] / len(trial)
        sizes[label] = max(slices * 20, min(100_000, round(batch_seconds / max(per_call, 1e-9))))
    results = {label: Samples() for label in ops}
    order = list(contenders.items())
    turn = 0
    for r in range(rounds):
        for label, (op, _target) in ops.items():
            n = sizes[label]
            args = make_args(op, n)
            spent = dict.fromkeys(contenders, 0.0)
            cpu = dict.fromkeys(contenders, 0.0)
            step = -(-n // slices)
            for start in range(0, n, step):
                chunk = args[start : start + step]
                turn += 1
                shift = turn % len(order)
                for name, contender in order[shift:] + order[:shift]:
                    wall, thread = timed(contender.prepare(op, len(chunk)), chunk)
                    spent[name] += wall
                    cpu[name] += thread
            samples = results[label]
            for name in contenders:
                samples.rate.setdefault(name, []).append(n / spent[name])
                samples.wall.setdefault(name, []).append(spent["seed"] / spent[name])
                samples.cpu.setdefault(name, []).append(cpu["seed"] / cpu[name])
        print(f"  round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    return results


def _median_range(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def report(
    title: str, seed_name: str, ops: dict[str, tuple[str, float]], results: dict[str, Samples], clock: str
) -> bool:
    print(f"\n{title}")
    with_raw = all("raw" in samples.rate for samples in results.values())
    header = ["op", "durastate /s", f"{seed_name} /s", "wall ratio (range)", "cpu ratio (range)", "target", "verdict"]
    if with_raw:
        header += ["raw /s", "raw/seed cpu (ceiling)"]
    rows = []
    all_pass = True
    for label, (_op, target) in ops.items():
        samples = results[label]
        median = statistics.median(samples.wall["ours"] if clock == "wall" else samples.cpu["ours"])
        ok = median >= target
        all_pass &= ok
        row = [
            label,
            f"{statistics.median(samples.rate['ours']):,.0f}",
            f"{statistics.median(samples.rate['seed']):,.0f}",
            _median_range(samples.wall["ours"]),
            _median_range(samples.cpu["ours"]),
            f">= {target:.2f}",
            "PASS" if ok else "MISS",
        ]
        if with_raw:
            row += [f"{statistics.median(samples.rate['raw']):,.0f}", _median_range(samples.cpu["raw"])]
        rows.append(row)
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *rows]:
        cells = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        print("| " + " | ".join(cells) + " |")
    return all_pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds (default 7; medians over them)")
    parser.add_argument("--slices", type=int, default=4, help="turns the two contenders take per batch (default 4)")
    parser.add_argument("--batch-ms", type=float, default=100.0, help="seed time per timed batch (default 100)")
    parser.add_argument("--only", choices=["vgi", "functualize"], help="run one of the two pairs")
    parser.add_argument(
        "--no-raw", action="store_true", help="leave out the raw sqlite3 column (the ceiling) of the vgi pair"
    )
    parser.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="which ratio the verdict uses: wall-clock (default) or this thread's CPU time (user + system), "
        "which other processes on a busy machine disturb far less (both are printed)",
    )
    parser.add_argument("--strict", action="store_true", help="exit with status 1 when an op misses its target")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.slices < 1 or args.batch_ms <= 0:
        parser.error("--rounds, --slices and --batch-ms must be positive")

    print(f"durastate compat bench: {' '.join(sys.argv)}")
    print(
        f"machine: {platform.system()} {platform.machine()}, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, durastate {durastate.__version__}; {args.rounds} rounds, "
        f"batches of ~{args.batch_ms:g} ms of seed time in {args.slices} interleaved slices"
    )
    sys.stdout.flush()
    all_pass = True
    with tempfile.TemporaryDirectory(prefix="durastate-bench-compat-") as folder:
        base = Path(folder)
        if args.only in (None, "vgi"):
            ours_vgi = CompatVgi(base / "compat-vgi.db")
            vgi_contenders: dict[str, Any] = {"ours": ours_vgi, "seed": VgiStyle(base / "vgi-style.db")}
            if not args.no_raw:
                vgi_contenders["raw"] = RawSqlite(base / "raw.db", statement_texts(ours_vgi.storage.store))
            try:
                for contender in vgi_contenders.values():
                    contender.preload(b"v" * VALUE_SIZE)
                workload = Workload()
                results = measure(
                    vgi_contenders, VGI_TARGETS, workload.args, args.rounds, args.slices, args.batch_ms / 1000
                )
            finally:
                for contender in vgi_contenders.values():
                    contender.close()
            all_pass &= report(
                "compat.vgi.FunctionStorage vs vgi-style (bench/vgi_style.py)",
                "vgi-style",
                VGI_TARGETS,
                results,
                args.clock,
            )
        if args.only in (None, "functualize"):
            ours_fz = Substrate(
                "compat.functualize",
                SQLiteSubstrate(base / "compat-functualize.db"),
            )
            seed_fz = Substrate(
                "functualize-style",
                FunctualizeStyleSubstrate(base / "functualize-style.db"),
            )
            try:
                for contender in (ours_fz, seed_fz):
                    contender.preload()
                rng = random.Random(20240601)
                ops = {label: (label, target) for label, target in FUNCTUALIZE_TARGETS.items()}
                results = measure(
                    {"ours": ours_fz, "seed": seed_fz},
                    ops,
                    lambda _op, n: [
                        (doc_key_of(i), doc_of(i, 1)) for i in (rng.randrange(DOC_PRELOAD) for _ in range(n))
                    ],
                    args.rounds,
                    args.slices,
                    args.batch_ms / 1000,
                )
            finally:
                ours_fz.close()
                seed_fz.close()
            all_pass &= report(
                "compat.functualize.SQLiteSubstrate vs functualize-style (bench/functualize_style.py)",
                "functualize-style",
                ops,
                results,
                args.clock,
            )
    print(
        "\nratio = seed time / durastate time for the same calls (higher is better), median over rounds "
        f"(min-max in brackets), by wall-clock and by this thread's CPU time; verdict by {args.clock} time"
    )
    print("ALL PASS" if all_pass else "SOME MISS")
    return 1 if args.strict and not all_pass else 0


if __name__ == "__main__":
    sys.exit(main())
