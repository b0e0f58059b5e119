"""Run functions in spawned processes and collect their results (the integrations' multi-process tests)."""

from __future__ import annotations

import multiprocessing
import signal
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

SPAWN = multiprocessing.get_context("spawn")
WORKER_TIMEOUT = 120.0


def _report(sender: Connection, func: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        sender.send((True, func(*args)))
    except BaseException:
        sender.send((False, traceback.format_exc()))


def in_processes(*calls: tuple[Callable[..., Any], tuple[Any, ...]]) -> list[Any]:
    """Run each ``func(*args)`` in its own spawned process; their results, in order.

    A worker's exception fails the test with the worker's traceback; one that
    does not answer within WORKER_TIMEOUT fails it as hung.
    """
    started = []
    for func, args in calls:
        receiver, sender = SPAWN.Pipe(duplex=False)
        process = SPAWN.Process(target=_report, args=(sender, func, args))
        process.start()
        sender.close()
        started.append((func.__name__, process, receiver))
    results = []
    try:
        for name, _process, receiver in started:
            assert receiver.poll(WORKER_TIMEOUT), f"worker {name} hung"
            ok, value = receiver.recv()
            assert ok, f"worker {name} failed:\n{value}"
            results.append(value)
    finally:
        for _name, process, _receiver in started:
            process.join(WORKER_TIMEOUT)
            if process.is_alive():
                process.kill()
    return results


def killed_in_a_process(func: Callable[..., Any], *args: Any) -> None:
    """Run ``func(*args)`` in a spawned process that is to kill itself (SIGKILL) partway through.

    Fails the test unless it died so: an exception, a clean exit or no end
    within WORKER_TIMEOUT (the process is then killed) all fail it.
    """
    process = SPAWN.Process(target=func, args=args)
    process.start()
    process.join(WORKER_TIMEOUT)
    if process.is_alive():
        process.kill()
        process.join()
        raise AssertionError(f"{func.__name__} never killed itself")
    assert process.exitcode == -signal.SIGKILL, f"{func.__name__} ended with exit code {process.exitcode}, not killed"
