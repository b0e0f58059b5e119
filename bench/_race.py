"""The head-to-head race the integration benches share: durastate against its peers, op by op.

Import it from a bench script run as ``python bench/NAME.py`` (the script's
folder is then first on ``sys.path``): ``from _race import race, arace``.
``arguments`` parses the options every such bench takes; ``postgres_schema``
gives a race on PostgreSQL a schema of its own.

Each contender offers the same ops (a label -> {op name -> callable}); the
first contender is durastate, the rest are its peers. Every round times
``calls`` calls of each op for each contender, alternating which contender
goes first (so neither always runs on a warm cache), and round 0 only warms
up. The report gives wall and CPU time per call (medians over the rounds)
and, per peer, the ratio peer / durastate (median and range over rounds:
above 1, durastate is faster). CPU is the whole process's, so worker threads
of a backend (aiosqlite's, psycopg's, a file backend's) are counted.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from durastate.testing import postgres_server

Took = tuple[float, float]  # (wall, CPU) seconds per call
Times = dict[tuple[str, str], list[Took]]


def arguments(
    doc: str, *, durability: bool = True, synchronous_commit: bool = False, baseline: bool = False
) -> argparse.Namespace:
    """``--rounds``, ``--calls``, ``--postgres-url`` (also race there) and, with ``durability``, ``--durability``;
    with ``synchronous_commit``, ``--pg-synchronous-commit on|off`` (for ``postgres_schema``); with
    ``baseline``, ``--baseline-src`` (another durastate tree raced beside this one: ``_baseline``).

    The description is the first paragraph of ``doc`` (the bench's docstring).
    """
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--postgres-url", default=None, help="also race on this PostgreSQL server (a schema each)")
    if durability:
        parser.add_argument("--durability", choices=["normal", "full"], default="normal")
    if synchronous_commit:
        parser.add_argument(
            "--pg-synchronous-commit",
            choices=["on", "off"],
            default="on",
            help="off: PostgreSQL commits return before their WAL is flushed (a file without fsync's durability)",
        )
    if baseline:
        parser.add_argument(
            "--baseline-src",
            default=None,
            help="also race the durastate under this src folder (say, main's checkout) as '<name>-base'",
        )
    return parser.parse_args()


def with_synchronous_commit(url: str, value: str) -> str:
    """``url`` with ``-csynchronous_commit=<value>`` added to its sessions' options.

    A session setting: the server's configuration is left alone. The space
    between options is ``%20`` (libpq does not read ``+`` as a space).
    """
    parts = urlsplit(url)
    query = parse_qsl(parts.query)
    options = " ".join([v for k, v in query if k == "options"] + [f"-csynchronous_commit={value}"])
    kept = [(k, v) for k, v in query if k != "options"]
    return urlunsplit(parts._replace(query=urlencode([*kept, ("options", options)], quote_via=quote)))


@contextmanager
def postgres_schema(base_url: str, *, synchronous_commit: str | None = None) -> Iterator[tuple[str, str]]:
    """(URL bound to a fresh schema of the server at ``base_url``, its name); the schema is dropped on leaving.

    ``synchronous_commit`` (``"on"``/``"off"``): the URL's sessions set it (``None``: the server's setting).
    """
    url, schema = postgres_server.create_schema(base_url)
    if synchronous_commit is not None:
        url = with_synchronous_commit(url, synchronous_commit)
    try:
        yield url, schema
    finally:
        postgres_server.drop_schema(base_url, schema)


def time_calls(op: Callable[[], Any], calls: int) -> Took:
    """(wall, CPU) seconds per call of ``calls`` calls of ``op``."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        op()
    return (time.perf_counter() - wall) / calls, (time.process_time() - cpu) / calls


async def atime_calls(op: Callable[[], Awaitable[Any]], calls: int) -> Took:
    """:func:`time_calls` for an op that returns an awaitable (awaited each call)."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        await op()
    return (time.perf_counter() - wall) / calls, (time.process_time() - cpu) / calls


def _schedule(ops: dict[str, dict[str, Any]], rounds: int) -> Iterator[tuple[str, str, bool]]:
    """(op, contender, counted) in race order: contenders alternate who goes first; round 0 is not counted."""
    labels = list(ops)
    for round_number in range(rounds + 1):
        order = labels if round_number % 2 else labels[::-1]
        for op in ops[labels[0]]:
            for label in order:
                yield op, label, round_number > 0


def race(title: str, ops: dict[str, dict[str, Callable[[], Any]]], rounds: int, calls: int) -> None:
    """Race synchronous ops and print the report (see the module docstring)."""
    times: Times = {}
    for op, label, counted in _schedule(ops, rounds):
        took = time_calls(ops[label][op], calls)
        if counted:
            times.setdefault((op, label), []).append(took)
    report(title, list(ops), list(ops[next(iter(ops))]), times, rounds, calls)


async def arace(title: str, ops: dict[str, dict[str, Callable[[], Awaitable[Any]]]], rounds: int, calls: int) -> None:
    """Race ops that return awaitables and print the report (see the module docstring)."""
    times: Times = {}
    for op, label, counted in _schedule(ops, rounds):
        took = await atime_calls(ops[label][op], calls)
        if counted:
            times.setdefault((op, label), []).append(took)
    report(title, list(ops), list(ops[next(iter(ops))]), times, rounds, calls)


def report(title: str, labels: list[str], names: list[str], times: Times, rounds: int, calls: int) -> None:
    """Print a race's medians per contender and each peer's ratio to the first contender (durastate)."""
    print(f"\n## {title} ({rounds} rounds x {calls} calls; ratio = peer / durastate, > 1: durastate faster)")
    ours, peers = labels[0], labels[1:]
    width = max(len(op) for op in [*names, "op"]) + 2
    for kind, at in (("wall", 0), ("CPU", 1)):
        print(f"\n{kind} time per call\n")
        # A column as wide as its label (and a space) needs, at least 16 / 24.
        cols = [max(16, len(label) + 4) for label in labels]
        vs_cols = [max(24, len(peer) + 5) for peer in peers]
        header = f"{'op':{width}}" + "".join(f"{label + ' us':>{col}}" for label, col in zip(labels, cols, strict=True))
        print(header + "".join(f"{'vs ' + p:>{col}}" for p, col in zip(peers, vs_cols, strict=True)))
        for op in names:
            line = f"{op:{width}}" + "".join(
                f"{statistics.median(t[at] for t in times[op, label]) * 1e6:{col}.0f}"
                for label, col in zip(labels, cols, strict=True)
            )
            for peer, col in zip(peers, vs_cols, strict=True):
                ratios = [p[at] / d[at] for p, d in zip(times[op, peer], times[op, ours], strict=True)]
                cell = f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
                line += f"{cell:>{col}}"
            print(line)
