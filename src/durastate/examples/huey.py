"""``python -m durastate.examples.huey [URL]``: a huey consumer is killed mid-task, and nothing is lost.

1. ``DurastateHuey`` on a durastate store (the first argument, or a fresh
   SQLite file) with a short lease (``LEASE`` seconds) so the demo is quick.
2. Six ``square`` tasks are enqueued. A real huey consumer process starts;
   ``square(3)`` hangs on its first run (a stuck or crashing worker) and the
   consumer is killed with SIGKILL while it holds that task.
3. With huey's own storages the task would be gone (dequeue deletes it).
   Here it was only leased: a second consumer gets it again once the lease
   runs out and finishes it. Every result arrives; exit status 0 if all
   checks hold.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
from typing import Any

from huey.consumer import Consumer

from durastate.integrations.huey import DurastateHuey

from ._url import store_url

LEASE = 2.0  # seconds; the default is 300 (a renewing thread keeps running tasks leased)
NUMBERS = [1, 2, 3, 4, 5, 6]
STUCK = 3  # square(3) hangs on its first run
DEADLINE = 60.0
MARKS = (b"example", b"runs")  # kv address of this example's run counters


def make_app(url: str) -> tuple[DurastateHuey, Any]:
    huey = DurastateHuey("durastate-example", url=url, lease=LEASE)
    kv = huey.storage.store.kv

    @huey.task()  # type: ignore[untyped-decorator]
    def square(n: int) -> int:
        runs = kv.incr(*MARKS, b"%d" % n)
        if n == STUCK and runs == 1:
            print(f"  consumer pid {os.getpid()}: square({n}) is stuck (first run)", flush=True)
            threading.Event().wait()  # never returns: this consumer gets killed
        print(f"  consumer pid {os.getpid()}: square({n}) = {n * n} (run {runs})", flush=True)
        return n * n

    return huey, square


def consume(url: str) -> None:
    """One huey consumer, until it is killed or terminated.

    One worker thread, so when the stuck task is killed it is the only one
    in flight (with more, a task another thread was running at that moment
    would rightly run again too).
    """
    huey, _ = make_app(url)
    Consumer(huey, workers=1, initial_delay=0.05, max_delay=0.2, check_worker_health=False).run()


def main(argv: list[str]) -> int:
    """Run the example; ``argv`` are its arguments without the program name (``--url URL``)."""
    with store_url(argv, "tasks", "huey tasks on durastate: a consumer killed mid-task, its task redelivered.") as url:
        return run(url)


def run(url: str) -> int:
    print(f"store: {url}")
    huey, square = make_app(url)
    kv = huey.storage.store.kv
    huey.storage.flush_all()
    kv.clear(MARKS[0])
    results = {n: square(n) for n in NUMBERS}
    print(f"enqueued square({', '.join(map(str, NUMBERS))}); lease {LEASE} s")

    ctx = multiprocessing.get_context("spawn")
    first = ctx.Process(target=consume, args=(url,))
    second = ctx.Process(target=consume, args=(url,))
    problems = []
    try:
        first.start()
        deadline = time.monotonic() + DEADLINE
        while kv.counter(*MARKS, b"%d" % STUCK) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(first.pid or 0, signal.SIGKILL)
        first.join(DEADLINE)
        print(f"main: killed consumer pid {first.pid} with SIGKILL while it held square({STUCK})")

        second.start()
        print(f"main: started consumer pid {second.pid}; square({STUCK}) comes back when its lease runs out")
        for n, result in results.items():
            value = result.get(blocking=True, timeout=DEADLINE)
            if value != n * n:
                problems.append(f"square({n}) returned {value!r}")
    finally:
        for proc in (first, second):
            if proc.is_alive():
                proc.terminate()
            if proc.pid is not None:
                proc.join(DEADLINE)
    runs = {n: kv.counter(*MARKS, b"%d" % n) for n in NUMBERS}
    if runs[STUCK] != 2 or any(count != 1 for n, count in runs.items() if n != STUCK):
        problems.append(f"runs per task {runs}: expected 1 each, 2 for square({STUCK})")
    if huey.pending_count() != 0:
        problems.append(f"{huey.pending_count()} task(s) still queued")
    huey.close()
    for problem in problems:
        print(f"problem: {problem}")
    print("FAILED" if problems else f"OK: all {len(NUMBERS)} results in; square({STUCK}) survived its consumer's death")
    return 1 if problems else 0


if __name__ == "__main__":
    # Run as the importable module so the spawned consumers find the same task names.
    from durastate.examples import huey as example

    sys.exit(example.main(sys.argv[1:]))
