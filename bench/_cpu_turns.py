"""Worker processes, one per durastate tree, taking turns at one-process CPU measurements (put_cpu, queue_cpu).

Each worker runs ``script --worker SRC [extra...]`` and answers
``{"path": ..., "count": ...}`` lines on stdin with the CPU seconds of
``count`` operations through that path (``serve``). The workers take turns
round by round (the first one moves each round), paths interleaved within a
round, so load elsewhere on the machine lands on all of them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def arguments(doc: str | None, count: str, default: int, paths: Sequence[str]) -> argparse.ArgumentParser:
    """The options both scripts take: ``--COUNT``, ``--rounds``, ``--src``, ``--only``, ``--worker``."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(f"--{count}", type=int, default=default)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--src", action="append", help="a folder holding durastate/ (repeatable)")
    parser.add_argument("--only", choices=paths, help="run one path once in this process (for callgrind)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    return parser


def serve(src: str, one_path: Callable[[str, int], float]) -> None:
    """A worker's loop (durastate imported from ``src``, checked): ``one_path(path, count)`` a request line."""
    import durastate

    assert Path(durastate.__file__).resolve().is_relative_to(Path(src).resolve()), durastate.__file__
    for line in sys.stdin:
        command = json.loads(line)
        print(json.dumps(one_path(command["path"], command["count"])), flush=True)


def run(
    script: str,
    args: argparse.Namespace,
    count: int,
    paths: Sequence[str],
    one_path: Callable[[str, int], float],
    default_src: str,
) -> tuple[list[str], dict[tuple[int, str], list[float]]] | None:
    """What a script's ``main`` does with ``arguments``' options: serve as a ``--worker``, run ``--only`` once in
    this process (printing its CPU seconds), or have one worker per ``--src`` take turns; ``None`` when done here,
    else the sources and ``take_turns``' figures."""
    if args.worker:
        sys.path.insert(0, args.worker)
        serve(args.worker, one_path)
        return None
    sources: list[str] = args.src or [default_src]
    if args.only:
        sys.path.insert(0, sources[0])
        print(f"{one_path(args.only, count):.6f}")
        return None
    return sources, take_turns(script, sources, paths, count, args.rounds)


def take_turns(
    script: str, sources: Sequence[str], paths: Sequence[str], count: int, rounds: int, extra: Sequence[str] = ()
) -> dict[tuple[int, str], list[float]]:
    """Microseconds per operation of each (source index, path), one value a round."""
    workers: list[Any] = [
        subprocess.Popen(
            [sys.executable, script, "--worker", src, *extra], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for src in sources
    ]
    spent: dict[tuple[int, str], list[float]] = {(w, p): [] for w in range(len(workers)) for p in paths}
    for round_number in range(rounds):
        order = list(range(len(workers)))
        order = order[round_number % len(order) :] + order[: round_number % len(order)]
        for path_name in paths:
            for w in order:
                workers[w].stdin.write(json.dumps({"path": path_name, "count": count}) + "\n")
                workers[w].stdin.flush()
                spent[(w, path_name)].append(json.loads(workers[w].stdout.readline()) / count * 1e6)
    for worker in workers:
        worker.stdin.close()
        worker.wait()
    return spent
