"""A PostgreSQL failover loses nothing acknowledged: a real pg_auto_failover cluster under a mixed workload.

A monitor and two data nodes replicating synchronously
(``durastate.testing.ha``), three processes each holding one store on the
cluster's multi-host URL (two on the sync API, one on ``durastate.aio``)
running the workload of ``durastate.testing.failover``, which logs every
acknowledged call. Two faults, one after the other, on the same stores:

(a) SIGKILL of the primary's pg_autoctl and postmaster: the monitor
    promotes the standby;
(b) ``pg_autoctl perform switchover`` once the killed node has rejoined:
    the primary is demoted (its connections cut), the standby promoted.

After each, every process goes on acknowledging writes with the store it
opened, every waiter in ``claim(wait=)`` takes items again, and every write
acknowledged so far is on the new primary; at the end the full check
(nothing applied twice, every queue item acknowledged exactly once, the
abandoned ones redelivered after their lease). The seconds from each fault
to the first acknowledged write after it are printed (``-s``) and recorded
as test properties; ``bench/failover.py`` reports them over several runs.
Nothing here asserts a timing: the bounds below only keep a broken
failover from hanging the suite.

The cluster needs Debian's ``postgresql-15-auto-failover``; the test
installs it when it runs as root (CI) and skips, saying so, otherwise.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import durastate
from durastate.engines.postgres_health import failover_facts
from durastate.testing import failover
from durastate.testing.ha import AutoFailoverCluster, find_pg_autoctl

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

MODES = ("sync", "sync", "async")
HANG_GUARD = 60.0  # seconds: a step that takes longer is a hang, not a slow failover


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[AutoFailoverCluster]:
    pg_autoctl, reason = find_pg_autoctl()
    if pg_autoctl is None:
        if os.geteuid() == 0:
            pytest.fail(f"pg_auto_failover could not be installed: {reason}")
        pytest.skip(f"pg_auto_failover is not available: {reason}")
    # Bringing the cluster up is pg_auto_failover's work, not durastate's, and under load it can fail on its own:
    # a CI run saw node_1's pg_autoctl give up while node_2 joined (its node-active service, unable to reach its
    # local server, restarted 5 times within a second and stopped). A second cluster, from scratch, is tried once;
    # what the test asserts starts only once one is up.
    for attempt in range(2):
        c = AutoFailoverCluster(Path(f"/tmp/durastate-ha-{os.getpid()}-{time.monotonic_ns()}"), pg_autoctl)
        try:
            c.start()
            break
        except (RuntimeError, TimeoutError) as exc:
            c.stop()
            if attempt:
                raise
            print(f"cluster start failed, starting a new one: {str(exc)[:500]}")
    try:
        yield c
    finally:
        c.stop()


def _errors(lines: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [line for tag_lines in lines.values() for line in tag_lines if line["op"] == "error"]


def test_failover_loses_nothing_acknowledged(
    cluster: AutoFailoverCluster, tmp_path: Path, record_property: Any
) -> None:
    with durastate.open(cluster.url) as store:  # migrate once, before the workers race to
        facts, warnings = failover_facts(store.engine)
    # What `durastate doctor` says of this cluster: commits wait for the synchronous standby.
    assert facts["synchronous_standbys"] == 1 and facts["commits_wait_for_a_standby"] is True, facts
    assert warnings == []
    primary = cluster.primary()
    [standby] = [node for node in cluster.nodes if node is not primary]
    cluster.wait_replayed(standby)  # the migration above, applied there (commits wait for its flush only)
    with durastate.open(standby.url, read_only=True) as store:
        facts, warnings = failover_facts(store.engine)
    assert facts["in_recovery"] is True and any("standby (in recovery)" in w for w in warnings)
    workers = failover.Workers(cluster.url, tmp_path, MODES)
    timings: dict[str, float] = {}
    try:
        workers.wait_until("the workload to start", failover.writes_after(0.0, 50))

        # (a) SIGKILL of the primary.
        fault = time.monotonic()
        killed = cluster.kill_primary()
        cluster.wait_for_primary(other_than=killed, timeout=HANG_GUARD)
        timings["kill: cluster promoted"] = time.monotonic() - fault
        workers.wait_until("writes after the kill", failover.writes_after(fault))
        workers.wait_until("waiters waking after the kill", failover.woke_after(fault))
        timings["kill: first write"] = failover.write_stall(workers.all_lines(), fault)
        found = failover.check(cluster.url, workers.lines(), final=False)
        assert not found.problems, found.problems

        # (b) A switchover, once the killed node is back as the standby.
        cluster.restart(killed)
        cluster.wait_stable(HANG_GUARD)
        fault = time.monotonic()
        cluster.switchover()
        timings["switchover: command returned"] = time.monotonic() - fault
        workers.wait_until("writes after the switchover", failover.writes_after(fault))
        workers.wait_until("waiters waking after the switchover", failover.woke_after(fault))
        workers.stop()
    finally:
        workers.kill()
    lines = workers.lines()
    timings["switchover: first write"] = failover.write_stall(workers.all_lines(), fault)
    found = failover.check(cluster.url, lines)
    for name, seconds in timings.items():
        record_property(name, round(seconds, 2))
    print(f"\nfailover timings (s): {timings}; acknowledged: {dict(found.acknowledged)}; errors: {dict(found.errors)}")
    for line in _errors(lines):
        print(f"  {line['what']}: {line['error']}: {line['message'][-120:]} at {line.get('where')}")
    assert not found.problems, found.problems
    # Each process opened its store once and carried on with it through both faults.
    assert all(sum(1 for line in tl if line["op"] == "open") == 1 for tl in lines.values())
    # Abandoned claims came back after their lease: check() found every pushed item acknowledged.
    assert found.acknowledged["ack"] > 0 and found.acknowledged["nack"] > 0 and found.acknowledged["abandon"] > 0
    # A caller may see an honest StoreUnavailable (nothing applied) from a transaction the failover cut;
    # never another error type.
    assert {line["error"] for line in _errors(lines)} <= {"StoreUnavailable"}, _errors(lines)[:5]
