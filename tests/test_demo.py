"""``python -m durastate.demo`` (``make demo``) runs end to end and tells the truth."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import durastate
from durastate import demo

pytestmark = pytest.mark.multiprocess


def run_demo(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durastate.demo"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_demo_processes_every_job_once_on_the_default_store(tmp_path: Path) -> None:
    # The default store already holds other data, and stale state of a
    # previous demo run: the demo must clear only its own.
    default_path = tmp_path / ".durastate" / "state.db"
    with durastate.open(default_path) as store:
        store.kv.put(b"someone-else", b"ns", b"k", b"keep me")
        store.queues.push("someone-else", [b"keep me too"])
        store.kv.incr(demo.SCOPE, b"stats", b"processed", 99)
        store.queues.push(demo.QUEUE, [b"job-99"])

    result = run_demo(tmp_path)

    assert result.returncode == 0, f"demo failed:\n{result.stdout}\n{result.stderr}"
    lines = result.stdout.strip().splitlines()
    assert lines[-1].startswith(f"OK: all {demo.JOBS} jobs processed exactly once, counters agree"), result.stdout
    assert any("killed worker-1 with SIGKILL" in line for line in lines), result.stdout
    assert any("(attempt 2)" in line for line in lines), result.stdout

    # What it printed is what it stored, in ./.durastate/state.db of its cwd.
    with durastate.open(default_path) as store:
        jobs = [demo.job_name(n) for n in range(1, demo.JOBS + 1)]
        assert [store.kv.counter(demo.SCOPE, b"times-processed", job) for job in jobs] == [1] * demo.JOBS
        assert store.kv.counter(demo.SCOPE, b"stats", b"processed") == demo.JOBS
        assert store.queues.pop(demo.QUEUE) is None
        assert store.kv.get(b"someone-else", b"ns", b"k") == b"keep me"
        assert store.queues.pop("someone-else") == b"keep me too"


def test_demo_check_reports_double_processing_and_missing_redelivery() -> None:
    with durastate.open("memory:") as store:
        jobs = [demo.job_name(n) for n in range(1, demo.JOBS + 1)]
        for n, job in enumerate(jobs, start=1):
            store.kv.put(demo.SCOPE, b"results", job, str(n * n).encode())
            store.kv.put(demo.SCOPE, b"attempt", job, b"1")
            store.kv.incr(demo.SCOPE, b"times-processed", job)
            store.kv.incr(demo.SCOPE, b"stats", b"processed")
        assert demo.check(store, jobs, killed_job=jobs[0]) == [
            "job-01 (held by the killed worker) was not redelivered: attempt b'1'"
        ]
        store.kv.put(demo.SCOPE, b"attempt", jobs[0], b"2")
        assert demo.check(store, jobs, killed_job=jobs[0]) == []

        store.kv.incr(demo.SCOPE, b"times-processed", jobs[3])
        problems = demo.check(store, jobs, killed_job=jobs[0])
        assert "job-04 was processed 2 times" in problems
        assert any(p.startswith("total counter says 12, per-job counters add up to 13") for p in problems)


def test_a_closed_stdout_ends_the_demo_quietly_in_every_process(tmp_path: Path) -> None:
    """``durastate demo | head -3``: the workers print after the reader left; none of the three processes
    prints a BrokenPipeError traceback, and the command exits 141 as every command does on a closed stdout."""
    # The workers are spawned in tmp_path: a relative PYTHONPATH would give them another durastate than this one.
    source = str(Path(durastate.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([source, os.environ.get("PYTHONPATH", "")])}
    env = {k: v for k, v in env.items() if not k.startswith("DURASTATE_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "durastate.cli", "demo"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    for _ in range(3):
        assert proc.stdout.readline()
    proc.stdout.close()  # as head does after its three lines; the jobs and their lines are still to come
    stderr = proc.stderr.read()
    assert proc.wait(timeout=120) == 141, stderr
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
