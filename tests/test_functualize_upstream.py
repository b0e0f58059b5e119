"""functualize itself on durastate: its plugin's own test suite and a real app, on two functualize versions.

* functualize-state-sqlite 0.3.0's ``tests/test_sqlite_substrate.py``, taken
  unchanged from its sdist (``pip download`` into a cache under the venv on
  first use, never vendored), runs with durastate's substrate in place of its
  own (``tests/upstream/functualize_shim.py``) on an SQLite file and on
  PostgreSQL: all 23 tests must pass.
* ``durastate.compat.functualize.SQLiteStatePlugin`` boots inside a real
  ``FunctualizeApp`` and the engine's substrate in effect is ours
  (``tests/upstream/real_app_check.py``).

Both on functualize 0.4.0 (the ``[test]`` extra's pin, in the venv) and on
0.3.0 (``pip install --no-deps --target`` into the same cache: 0.3.0 has the
same dependencies as 0.4.0, so it needs nothing else). Each run is a
subprocess with the version under test first on ``sys.path``: bounded (a few
seconds each, plus one download per cache) and no second venv.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from durastate.testing import postgres_server

FUNCTUALIZE_STATE_SQLITE = "0.3.0"  # whose sdist's test file runs here
UPSTREAM_TEST_FILE = "tests/test_sqlite_substrate.py"
UPSTREAM_TEST_COUNT = 23
FUNCTUALIZE_IN_VENV = "0.4.0"  # pinned in pyproject.toml's [test] extra
FUNCTUALIZE_OLDER = "0.3.0"  # installed into the cache for these tests
CACHE = Path(sys.prefix) / "durastate-upstream"
HERE = Path(__file__).parent / "upstream"
TIMEOUT = 600


def _pip(*args: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pip", *args, "--quiet", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(f"pip {' '.join(args)} failed (needs the package index):\n{result.stderr[-2000:]}")


@contextlib.contextmanager
def _cache_lock() -> Iterator[None]:
    """One filler of the cache at a time (parallel test workers each run these session fixtures): a second
    one would otherwise remove the folder the first just put in place while its tests read it."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="session")
def upstream_suite() -> Path:
    """The extracted sdist of functualize-state-sqlite (downloaded once per venv)."""
    root = CACHE / f"functualize_state_sqlite-{FUNCTUALIZE_STATE_SQLITE}"
    with _cache_lock():
        if not (root / UPSTREAM_TEST_FILE).is_file():
            _download_upstream_suite(root)
    return root


def _download_upstream_suite(root: Path) -> None:
    with tempfile.TemporaryDirectory(dir=CACHE) as scratch:  # renamed into place only when complete
        _pip(
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"functualize-state-sqlite=={FUNCTUALIZE_STATE_SQLITE}",
            "--dest",
            scratch,
        )
        (sdist,) = Path(scratch).glob("*.tar.gz")
        with tarfile.open(sdist) as archive:
            archive.extractall(scratch, filter="data")
        shutil.rmtree(root, ignore_errors=True)
        (Path(scratch) / root.name).rename(root)


@pytest.fixture(scope="session")
def older_functualize() -> Path:
    """A folder holding functualize 0.3.0 alone, to put first on ``PYTHONPATH``."""
    target = CACHE / f"functualize-{FUNCTUALIZE_OLDER}"
    with _cache_lock():
        if not (target / "functualize" / "__init__.py").is_file():
            with tempfile.TemporaryDirectory(dir=CACHE) as scratch:  # renamed into place only when complete
                packages = Path(scratch) / "packages"
                _pip("install", "--no-deps", "--target", str(packages), f"functualize=={FUNCTUALIZE_OLDER}")
                shutil.rmtree(target, ignore_errors=True)
                packages.rename(target)
    return target


def _functualize_path(version: str, request: pytest.FixtureRequest) -> list[str]:
    """``PYTHONPATH`` entries that make ``import functualize`` load ``version``."""
    if version == FUNCTUALIZE_IN_VENV:
        installed = importlib.metadata.version("functualize")
        assert installed == FUNCTUALIZE_IN_VENV, (
            f"the venv has functualize {installed}; the [test] extra pins {FUNCTUALIZE_IN_VENV} (make test reinstalls)"
        )
        return []
    return [str(request.getfixturevalue("older_functualize"))]


def _postgres_env(engine: str) -> dict[str, str]:
    if engine != "postgres":
        return {}
    base, reason = postgres_server.server_url()
    if base is None:
        pytest.skip(f"PostgreSQL half skipped: {reason}")
    return {postgres_server.ENV_URL: base}


@pytest.mark.slow  # a pytest subprocess each
@pytest.mark.parametrize("engine", ["sqlite-file", "postgres"])
@pytest.mark.parametrize("version", [FUNCTUALIZE_IN_VENV, FUNCTUALIZE_OLDER])
def test_functualize_state_sqlite_suite_passes_on_durastate(
    upstream_suite: Path, version: str, engine: str, request: pytest.FixtureRequest
) -> None:
    env = {
        **os.environ,
        **_postgres_env(engine),
        "PYTHONPATH": os.pathsep.join([str(HERE), *_functualize_path(version, request)]),
        "DURASTATE_SHIM_ENGINE": engine,
    }
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            UPSTREAM_TEST_FILE,
            "-p",
            "functualize_shim",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(upstream_suite),
            "-c",
            str(upstream_suite / "pyproject.toml"),
        ],
        cwd=upstream_suite,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    output = result.stdout + result.stderr
    assert f"functualize {version} from" in output, output[-3000:]
    assert f"durastate's substrate on {engine}" in output, output[-3000:]
    # The summary line, wherever it is (plugins may warn after it).
    summaries = [line for line in output.splitlines() if re.fullmatch(r"=* ?\d+ \w+.* in [\d.]+s.*=*", line.strip())]
    assert summaries, output[-3000:]
    # "in 62.65s (0:01:02)": past a minute pytest adds the h:mm:ss.
    passed = rf"=* ?{UPSTREAM_TEST_COUNT} passed in [\d.]+s( \(\d+:\d\d:\d\d\))? ?=*"
    assert re.fullmatch(passed, summaries[-1].strip()), output[-3000:]
    assert result.returncode == 0, output[-3000:]


@pytest.mark.parametrize("version", [FUNCTUALIZE_IN_VENV, FUNCTUALIZE_OLDER])
def test_the_plugin_installs_into_a_real_functualize_app(
    version: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """0.4.0 made ``app.substrate`` read-only; the plugin installs through ``install_substrate()`` there."""
    result = subprocess.run(
        [sys.executable, str(HERE / "real_app_check.py")],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(_functualize_path(version, request))},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report == {
        "version": version,
        "installed": True,
        "in_effect_is_ours": True,
        "state_in_durastate": True,
        "json_files": [],
    }
