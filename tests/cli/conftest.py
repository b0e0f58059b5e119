"""Fixtures of the CLI tests: a filled store on each shareable engine, ``run``, and two ways to run a command.

``run_cli(url, *args)`` runs ``python -m durastate.cli ARGS`` in a
subprocess (the console script's own code path) with ``DURASTATE_URL``
pointing at ``url`` and every other ``DURASTATE_`` variable removed, as a
user's shell does. ``cli_here(url, *args)`` runs the same command in this
process through click's ``CliRunner``, with the same environment: the bytes
the command writes to stdout and stderr and its exit code, without the
interpreter start, durastate import and a second store open that a
subprocess costs (about a second of CPU each, most of a paging walk's
time). click's runner, like a pipe, is not a terminal; it strips ANSI
escapes from ``click.echo`` as a real run does on a pipe, and encodes stdout
strictly (a real run would use surrogate escapes: stricter here).
``test_safe_output.test_in_process_runs_are_the_real_commands`` pins that
both ways give the same exit code and the same bytes; tests whose subject is
the process itself (the entry point, EPIPE, argv bytes, ``TZ``, hidden
extras) use ``run_cli``.

``run(*args)`` runs a command over the filled store in this process
(``cli_here``) and returns it as ``subprocess.run(..., text=True)`` would.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

import durastate
from durastate.cli.app import cli as cli_group
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


def cli_here(url: str | None, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """``durastate ARGS`` in this process, as ``run_cli`` runs it in a subprocess: raw stdout and stderr bytes and
    the exit code. An exception the command does not turn into an exit code is raised here (a subprocess would
    print its traceback and exit 1)."""
    overrides: dict[str, str | None] = {k: None for k in os.environ if k.startswith("DURASTATE_")}
    if url is not None:
        overrides["DURASTATE_URL"] = url
    overrides.update(env or {})
    done = CliRunner().invoke(cli_group, list(args), env=overrides, catch_exceptions=False, prog_name="durastate")
    return subprocess.CompletedProcess(["durastate", *args], done.exit_code, done.stdout_bytes, done.stderr_bytes)


def as_text(done: subprocess.CompletedProcess[bytes]) -> subprocess.CompletedProcess[str]:
    """``done`` decoded as ``subprocess.run(..., text=True)`` decodes a child's output (UTF-8, universal newlines)."""

    def text(data: bytes) -> str:
        return data.decode().replace("\r\n", "\n").replace("\r", "\n")

    return subprocess.CompletedProcess(done.args, done.returncode, text(done.stdout), text(done.stderr))


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
        done = as_text(cli_here(url, *args))
        if ok:
            assert done.returncode == 0, f"durastate {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
        return done

    return runner
