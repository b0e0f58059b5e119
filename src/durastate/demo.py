"""``python -m durastate.demo`` (what ``make demo`` runs): a work queue that survives a kill -9.

Read it top to bottom; it is the shortest honest tour of durastate:

1. open the embedded default store, ``./.durastate/state.db`` (created on
   first use), and clear this demo's own queue and kv scope, so a rerun
   starts clean and nothing else in the file is touched;
2. push ``JOBS`` jobs onto a queue;
3. start two worker processes. Each claims a job under a lease, "works"
   (squares a number) and then, in ONE transaction, records the result,
   bumps the job's processed-count and the total, and acks the job. Either
   all of that commits or none of it does;
4. ``worker-1`` hangs while holding its second job (a stuck or crashed
   worker); the main process kills it with SIGKILL;
5. nobody acks that job, so its lease runs out and ``worker-2`` gets it
   again (attempt 2);
6. check: every job processed exactly once, results right, counters agree,
   queue empty. Exit status 0 if so, 1 (with the reason) if not.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import time
from multiprocessing.connection import Connection
from typing import Any

import durastate

QUEUE = "demo.jobs"
SCOPE = b"demo"  # kv scope holding this demo's results and counters
JOBS = 12
LEASE = 1.5  # seconds a worker may hold a job before it is handed out again
WORK_TIME = 0.05  # pretend each job takes this long
DEADLINE = 20.0  # seconds before the demo gives up on a step


def job_name(n: int) -> bytes:
    return b"job-%02d" % n


def say(line: str) -> None:
    """A worker's line on stdout. When its reader has gone (``durastate demo | head -3``) the worker goes on
    quietly: stdout is pointed at /dev/null, so neither this print nor the exit's flush prints a
    ``BrokenPipeError`` traceback; the main process reports the closed output (the command exits 141)."""
    try:
        print(line, flush=True)
    except BrokenPipeError:
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)


def process(store: durastate.Store, worker: str, claim: Any) -> None:
    """Do one job and record it atomically with its ack."""
    n = int(claim.payload.split(b"-")[1])
    time.sleep(WORK_TIME)  # the "work"
    try:
        with store.transaction():
            store.kv.put(SCOPE, b"results", claim.payload, str(n * n).encode())
            store.kv.put(SCOPE, b"attempt", claim.payload, str(claim.attempts).encode())
            store.kv.incr(SCOPE, b"times-processed", claim.payload)
            store.kv.incr(SCOPE, b"stats", b"processed")
            # Removes the job; raises Conflict, rolling back the writes
            # above, if our lease ran out and someone else holds the job.
            claim.ack()
    except durastate.Conflict:
        say(f"  {worker}: lost the lease on {claim.payload.decode()}; its new holder will do it")
        return
    say(f"  {worker}: {claim.payload.decode()} -> {n * n:3d}   (attempt {claim.attempts})")


def worker(name: str, hang_on_job: int | None, start: Any, report: Connection) -> None:
    """Claim and process jobs until the queue has nothing left, even in flight.

    With ``hang_on_job=k`` the worker stops dead while holding its k-th job,
    after telling the main process which job that is.
    """
    with durastate.open() as store:
        start.wait(DEADLINE)  # begin together with the other worker
        claimed = 0
        waiting_said = False
        while True:
            claim = store.queues.claim(QUEUE, lease=LEASE, wait=0.25)
            if claim is None:
                stats = store.queues.stats(QUEUE)
                if stats.ready + stats.in_flight + stats.delayed == 0:
                    say(f"  {name}: queue empty, nothing in flight: done")
                    return
                if not waiting_said:
                    say(
                        f"  {name}: queue empty but {stats.in_flight} job(s) leased by someone; "
                        "waiting for the lease to run out"
                    )
                    waiting_said = True
                continue
            claimed += 1
            if claimed == hang_on_job:
                say(f"  {name}: holding {claim.payload.decode()} ... and now I hang")
                report.send(claim.payload)
                time.sleep(3600)  # stuck; the main process kills us
            process(store, name, claim)


def check(store: durastate.Store, jobs: list[bytes], killed_job: bytes) -> list[str]:
    """Everything that is wrong with the final state ([] when all is well)."""
    kv = store.kv
    problems = []
    counts = {job: kv.counter(SCOPE, b"times-processed", job) for job in jobs}
    for job, count in counts.items():
        if count != 1:
            problems.append(f"{job.decode()} was processed {count} times")
        n = int(job.split(b"-")[1])
        if kv.get(SCOPE, b"results", job) != str(n * n).encode():
            problems.append(f"{job.decode()} has result {kv.get(SCOPE, b'results', job)!r}, expected {n * n}")
    total = kv.counter(SCOPE, b"stats", b"processed")
    if total != JOBS or sum(counts.values()) != JOBS:
        problems.append(f"total counter says {total}, per-job counters add up to {sum(counts.values())}, jobs: {JOBS}")
    attempt = kv.get(SCOPE, b"attempt", killed_job)
    if attempt is None or int(attempt) < 2:
        problems.append(f"{killed_job.decode()} (held by the killed worker) was not redelivered: attempt {attempt!r}")
    stats = store.queues.stats(QUEUE)
    if (stats.ready, stats.in_flight, stats.delayed, stats.dead) != (0, 0, 0, 0):
        problems.append(f"queue not empty: {stats}")
    return problems


def main() -> int:
    store = durastate.open()  # ./.durastate/state.db
    print(f"store: {store.url}")

    # 1. Start clean: only this demo's queue and scope.
    store.queues.clear(QUEUE)
    store.queues.delete_dead(QUEUE)
    store.kv.clear(SCOPE)

    # 2. Produce.
    jobs = [job_name(n) for n in range(1, JOBS + 1)]
    store.queues.push(QUEUE, jobs)
    print(f"pushed {JOBS} jobs onto {QUEUE!r}")

    # 3. Two workers; worker-1 will hang on its 2nd job.
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(3)
    ours, theirs = ctx.Pipe()
    worker1 = ctx.Process(target=worker, args=("worker-1", 2, start, theirs), name="worker-1")
    worker2 = ctx.Process(target=worker, args=("worker-2", None, start, theirs), name="worker-2")
    worker1.start()
    worker2.start()
    print(f"started worker-1 (pid {worker1.pid}) and worker-2 (pid {worker2.pid}), lease {LEASE} s")
    start.wait(DEADLINE)

    try:
        # 4. Kill the hanging worker while it holds a lease.
        if not ours.poll(DEADLINE):
            print("FAILED: worker-1 never reported the job it holds")
            return 1
        killed_job: bytes = ours.recv()
        worker1.kill()  # SIGKILL: no cleanup, no ack, no goodbye
        worker1.join(DEADLINE)
        print(f"main: killed worker-1 with SIGKILL while it held {killed_job.decode()}")

        # 5. worker-2 finishes everything, including the orphaned job.
        worker2.join(DEADLINE)
        if worker2.is_alive() or worker2.exitcode != 0:
            print(f"FAILED: worker-2 did not finish cleanly (exit code {worker2.exitcode})")
            return 1
    finally:
        for proc in (worker1, worker2):
            if proc.is_alive():
                proc.kill()
                proc.join()

    # 6. Check.
    problems = check(store, jobs, killed_job)
    store.close()
    for problem in problems:
        print(f"problem: {problem}")
    if problems:
        print(f"FAILED: {len(problems)} problem(s)")
        return 1
    print(
        f"OK: all {JOBS} jobs processed exactly once, counters agree (total {JOBS}); "
        f"{killed_job.decode()} was redelivered after its holder was killed"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
