"""Run pi-durable's own test suite with a chosen storage in place of its storages.

    .venv/bin/python tests/pi_durable_upstream/run.py [--storage-only] [--workers N] MODE [MODE ...] [-- pytest args]

Modes: ``durastate-sqlite``, ``durastate-postgres`` (needs
``DURASTATE_TEST_POSTGRES_URL``), ``pi-sqlite`` (pi-durable's own SQLite
storage, the reference), ``pi-memory`` (its MemoryStorage). Prints the
counts per mode and writes each run's JUnit XML next to the cached sdist.

The suite comes from the sdist of the installed pi-durable-python (pinned
in the ``[test]`` extra), fetched once with ``pip download`` into
``.venv/upstream/`` (never vendored into the repository). The selection is
the storage-facing part: ``test_sqlite_storage.py`` (pi-durable's shipped
``storage_conformance`` on fresh and reopened storage, plus its own SQLite
checks), ``test_testing_conformance.py`` and every ``test_harness_*.py`` and
``test_session_*.py`` (a durable agent through crashes and reopen).
``--storage-only`` leaves the Harness tests out; ``--workers N`` runs each
mode in N pytest-xdist workers (what ``make test`` does, with 2).
``pi_shim.py`` (a pytest plugin) swaps the storage.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PACKAGE = "pi-durable-python"
SELECTION = ("test_sqlite_storage.py", "test_testing_conformance.py", "test_harness_*.py", "test_session_*.py")
# Without the Harness tests (213 of 807), for a quick look (``--storage-only``).
STORAGE_SELECTION = ("test_sqlite_storage.py", "test_testing_conformance.py", "test_session_*.py")
MODES = ("durastate-sqlite", "durastate-postgres", "pi-sqlite", "pi-memory")


def cache_dir() -> Path:
    return Path(os.environ.get("PI_DURABLE_SDIST_CACHE", REPO / ".venv" / "upstream"))


def sdist_tests() -> Path:
    """The ``tests`` folder of the installed version's sdist, downloaded and unpacked once."""
    version = importlib.metadata.version(PACKAGE)
    root = cache_dir() / f"pi_durable_python-{version}"
    tests = root / "tests"
    if (tests / "conftest.py").exists():
        return tests
    cache_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                *[f"{PACKAGE}=={version}", "-d", tmp],
            ],
            check=True,
        )
        (archive,) = Path(tmp).glob("*.tar.gz")
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        shutil.rmtree(root, ignore_errors=True)
        Path(tmp, root.name).rename(root)
    return tests


@dataclasses.dataclass
class Result:
    mode: str
    passed: set[str]
    failed: dict[str, str]  # test id -> first line of the failure
    skipped: set[str]
    seconds: float
    junit: Path

    @property
    def total(self) -> int:
        return len(self.passed) + len(self.failed) + len(self.skipped)

    def summary(self) -> str:
        return (
            f"{self.mode}: {len(self.passed)} passed, {len(self.failed)} failed, {len(self.skipped)} skipped"
            f" of {self.total} in {self.seconds:.0f} s"
        )


@dataclasses.dataclass
class Running:
    mode: str
    process: subprocess.Popen[bytes]
    junit: Path


def start(
    mode: str, selection: tuple[str, ...] = SELECTION, pytest_args: list[str] | None = None, workers: int = 0
) -> Running:
    """Start one pytest subprocess over ``selection`` with ``mode``'s storage (``-x`` off: every test runs).

    ``workers`` > 0: that many pytest-xdist workers, each taking the next test
    of the queue (the suite mostly waits: on its own paced sleeps, and on
    PostgreSQL on round trips, so a second worker nearly halves the time).
    """
    tests = sdist_tests()
    files = sorted({str(p.name) for pattern in selection for p in tests.glob(pattern)})
    junit = cache_dir() / f"junit-{mode}{'' if selection else '-rerun'}.xml"
    junit.unlink(missing_ok=True)
    env = {
        **os.environ,
        "PI_SHIM_STORAGE": mode,
        # This checkout's durastate first (a worktree tests its own code, not the installed one).
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(tests), str(HERE)]),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    if mode == "durastate-postgres":
        env["PI_SHIM_POSTGRES_URL"] = os.environ["DURASTATE_TEST_POSTGRES_URL"]
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-c",
        str(HERE / "upstream.ini"),
        "--rootdir",
        str(tests),
        "-p",
        "pi_shim",
        "-p",
        "no:cacheprovider",
        "-q",
        "--no-header",
        "-rN",
        f"--junitxml={junit}",
        *(["-n", str(workers), "--dist", "load", "--maxschedchunk", "1"] if workers else []),
        *(pytest_args or []),
        *files,
    ]
    # Its own process group: ``stop`` signals the xdist workers too.
    process = subprocess.Popen(command, cwd=tests, env=env, stdout=subprocess.DEVNULL, start_new_session=True)
    return Running(mode, process, junit)


def stop(running: Running, grace: float = 20.0) -> None:
    """Interrupt a run that is still going (SIGTERM: the shim ends it as Ctrl-C would, closing and dropping what it
    opened), and kill it if it has not ended within ``grace`` seconds."""
    if running.process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(running.process.pid, signal.SIGTERM)
    try:
        running.process.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(running.process.pid, signal.SIGKILL)


def finish(running: Running) -> Result:
    running.process.wait()
    if not running.junit.exists():
        raise RuntimeError(f"{running.mode}: pytest exited {running.process.returncode} without a JUnit report")
    return parse(running.mode, running.junit)


def node_id(name: str) -> str:
    """The pytest node id of a JUnit ``module::test`` name."""
    module, _, test = name.partition("::")
    return f"{module}.py::{test}"


def rerun(mode: str, names: list[str]) -> Result:
    """Run just ``names`` again, in one fresh subprocess (for tests that depend on timing)."""
    return finish(start(mode, (), [node_id(name) for name in names]))


def run(
    mode: str, selection: tuple[str, ...] = SELECTION, pytest_args: list[str] | None = None, workers: int = 0
) -> Result:
    """``start`` and ``finish``: one run to its end."""
    return finish(start(mode, selection, pytest_args, workers))


def parse(mode: str, junit: Path) -> Result:
    tree = ET.parse(junit)
    passed: set[str] = set()
    failed: dict[str, str] = {}
    skipped: set[str] = set()
    seconds = 0.0
    for suite in tree.iter("testsuite"):
        seconds += float(suite.get("time", 0))
    for case in tree.iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is not None:
            failed[name] = (problem.get("message") or "").splitlines()[0][:300] if problem.get("message") else ""
        elif case.find("skipped") is not None:
            skipped.add(name)
        else:
            passed.add(name)
    return Result(mode, passed, failed, skipped, seconds, junit)


def main(argv: list[str]) -> int:
    if "--" in argv:
        split = argv.index("--")
        modes, extra = argv[:split], argv[split + 1 :]
    else:
        modes, extra = argv, []
    selection = SELECTION
    if "--storage-only" in modes:
        modes = [m for m in modes if m != "--storage-only"]
        selection = STORAGE_SELECTION
    workers = 0
    if "--workers" in modes:
        at = modes.index("--workers")
        workers = int(modes[at + 1])
        del modes[at : at + 2]
    for mode in modes or ["durastate-sqlite"]:
        if mode not in MODES:
            print(f"unknown mode {mode!r}; one of {', '.join(MODES)}", file=sys.stderr)
            return 2
        result = run(mode, selection, extra, workers)
        print(result.summary())
        for name, message in sorted(result.failed.items()):
            print(f"  FAILED {name}: {message}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
