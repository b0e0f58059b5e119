"""Fixtures of the CLI tests: a filled store on each shareable engine, and ``run``.

``run(*args)`` runs ``python -m durastate.cli ARGS`` in a subprocess (the
console script's own code path) with ``DURASTATE_URL`` pointing at the
test's store, and returns the completed process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import durastate
from durastate.testing.sample import Sample, fill

Run = Callable[..., subprocess.CompletedProcess[str]]


def run_cli(
    url: str | None, *args: str, cwd: Path | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DURASTATE_")}
    if url is not None:
        env["DURASTATE_URL"] = url
    return subprocess.run(
        [sys.executable, "-m", "durastate.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        input=stdin,
        timeout=120,
    )


# The filled store records document history, as a store opened with this policy does.
HISTORY = durastate.Retention(document_history=10)


@pytest.fixture
def filled(shared_url: str) -> tuple[str, Sample]:
    with durastate.open(shared_url, retention=HISTORY) as store:
        sample = fill(store)
    return shared_url, sample


@pytest.fixture
def run(filled: tuple[str, Sample]) -> Run:
    url, _ = filled

    def runner(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        done = run_cli(url, *args)
        if ok:
            assert done.returncode == 0, f"durastate {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
        return done

    return runner
