"""Another durastate tree imported beside this one, to race a change against what it replaces in one run.

    baseline = load_baseline("/path/to/other/checkout/src")   # the package as ``durastate_baseline``
    src = extract_src("main", Path(folder))                     # or git revision REV's src/, to run in a child

The copy is imported under the name ``durastate_baseline`` (its own modules
import each other relatively, so it runs on its own code), e.g. ``git
worktree add /tmp/base main`` then ``--baseline-src /tmp/base/src``.
"""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType

NAME = "durastate_baseline"
ROOT = Path(__file__).resolve().parents[1]


def load_baseline(src: str) -> ModuleType:
    """The durastate package under ``src`` (a folder holding ``durastate/``), imported as ``durastate_baseline``."""
    init = Path(src, "durastate", "__init__.py")
    if not init.is_file():
        raise SystemExit(f"--baseline-src {src}: no durastate/__init__.py there")
    spec = importlib.util.spec_from_file_location(NAME, init, submodule_search_locations=[str(init.parent)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[NAME] = module
    spec.loader.exec_module(module)
    return module


def baseline_module(name: str) -> ModuleType:
    """``durastate.<name>`` of the baseline (``load_baseline`` first)."""
    return importlib.import_module(f"{NAME}.{name}")


def extract_src(revision: str, folder: Path) -> Path:
    """``src/`` of git ``revision`` of this checkout, extracted under ``folder``; its path (a child's PYTHONPATH)."""
    archive = folder / "src.tar"
    subprocess.run(["git", "archive", "-o", str(archive), revision, "src"], cwd=ROOT, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(folder / revision, filter="data")
    return folder / revision / "src"
