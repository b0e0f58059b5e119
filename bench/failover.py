"""How long writes stall in a PostgreSQL failover, against how long the cluster itself takes to promote.

Runs the failover test's cluster and workload (``durastate.testing.ha``,
``durastate.testing.failover``: pg_auto_failover, a monitor and two
synchronous data nodes on loopback, three processes each holding one store
on the multi-host URL) and alternates the two faults ``--rounds`` times:
SIGKILL of the primary (then the killed node rejoins) and ``pg_autoctl
perform switchover``. For each fault it reports

* the cluster: seconds from the fault until the monitor reports a new
  writable primary (kill), or until ``perform switchover`` returns;
* durastate: seconds from the fault to the first write acknowledged after
  the stall it caused (``failover.write_stall``).

``--pool-backoff psycopg`` runs the workers with psycopg_pool's own
reconnect backoff (1 s, doubling) instead of durastate's (0.1 s growing to
at most 1 s, ``engines.postgres_pool``): the A/B of that change, in the
same cluster. ``--both`` runs the two one after the other (a fresh
cluster each). At the end the workload's check must find nothing lost or
applied twice, else the run fails.

Needs root (it installs Debian's postgresql-15-auto-failover if missing) or
pg_auto_failover installed: ``.venv/bin/python bench/failover.py --both``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import durastate
from durastate.testing import failover
from durastate.testing.ha import AutoFailoverCluster, find_pg_autoctl

MODES = ("sync", "sync", "async")
# The workers with psycopg_pool's own reconnect backoff (the behaviour before issue 23).
PSYCOPG_BACKOFF = (
    "import sys; import durastate.engines.postgres_pool as p; "
    "p._RefillAttempt.INITIAL_DELAY = 1.0; p._RefillAttempt.DELAY_BACKOFF = 2.0; p.REFILL_MAX_DELAY = 1e9; "
    "from durastate.testing.failover import main; main(sys.argv[1:])"
)


def run(backoff: str, rounds: int) -> dict[str, list[float]]:
    pg_autoctl, reason = find_pg_autoctl()
    if pg_autoctl is None:
        sys.exit(f"pg_auto_failover is not available: {reason}")
    root = Path(tempfile.mkdtemp(prefix="durastate-bench-ha-", dir="/tmp"))
    root.chmod(0o711)  # the cluster runs as the postgres user, inside
    cluster = AutoFailoverCluster(root / "cluster", pg_autoctl)
    results: dict[str, list[float]] = {k: [] for k in ("kill promoted", "kill write", "switch done", "switch write")}
    logs = root / "logs"
    logs.mkdir()
    try:
        cluster.start()
        durastate.open(cluster.url).close()
        prefix = [sys.executable, "-c", PSYCOPG_BACKOFF] if backoff == "psycopg" else []
        workers = failover.Workers(cluster.url, logs, MODES, prefix)
        try:
            workers.wait_until("the workload to start", failover.writes_after(0.0, 50))
            for _ in range(rounds):
                fault = time.monotonic()
                killed = cluster.kill_primary()
                cluster.wait_for_primary(other_than=killed)
                results["kill promoted"].append(time.monotonic() - fault)
                workers.wait_until("writes after the kill", failover.writes_after(fault))
                results["kill write"].append(failover.write_stall(workers.all_lines(), fault))
                cluster.restart(killed)
                cluster.wait_stable()
                fault = time.monotonic()
                cluster.switchover()
                results["switch done"].append(time.monotonic() - fault)
                workers.wait_until("writes after the switchover", failover.writes_after(fault))
                results["switch write"].append(failover.write_stall(workers.all_lines(), fault))
                cluster.wait_stable()
            workers.stop()
        finally:
            workers.kill()
        found = failover.check(cluster.url, workers.lines())
        if found.problems:
            sys.exit(f"the store lost or doubled acknowledged writes: {found.problems}")
        calls = sum(found.acknowledged.values())
        print(f"  ({backoff} backoff) acknowledged {calls} calls, errors {dict(found.errors)}")
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    return results


def report(backoff: str, results: dict[str, list[float]]) -> None:
    def show(values: list[float]) -> str:
        return f"median {statistics.median(values):5.2f} s  (min {min(values):.2f}, max {max(values):.2f})"

    print(f"pool backoff: {backoff}")
    print(f"  kill:       cluster promoted {show(results['kill promoted'])}")
    print(f"              first write      {show(results['kill write'])}")
    print(f"  switchover: command returned {show(results['switch done'])}")
    print(f"              first write      {show(results['switch write'])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="kill + switchover rounds per run (default 3)")
    parser.add_argument("--pool-backoff", choices=("durastate", "psycopg"), default="durastate")
    parser.add_argument("--both", action="store_true", help="run with each backoff, one after the other")
    args = parser.parse_args()
    runs = ("durastate", "psycopg") if args.both else (args.pool_backoff,)
    results = {backoff: run(backoff, args.rounds) for backoff in runs}
    for backoff, found in results.items():
        report(backoff, found)


if __name__ == "__main__":
    main()
