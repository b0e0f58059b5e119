"""Issue 26: pains of peer libraries that need no second engine or process (the others: conformance/pains.py,
test_pain_loop_thread.py, conformance/multiprocess.py).

* pain 4, space never returned: after 90 % of the data is deleted,
  ``maintain()`` gives the file back to the filesystem (at most twice the
  live data), and ``maintain(vacuum=True)`` does for a file made without
  incremental auto-vacuum;
* pain 9, pickle in storage: nothing in the package (but its test kit,
  ``durastate.testing``) imports ``pickle``,
  ``marshal`` or ``shelve``, or calls ``eval``/``exec``: stored bytes are
  never code.
"""

from __future__ import annotations

import ast
import os
import sqlite3
from pathlib import Path

import durastate

PACKAGE = Path(durastate.__file__).parent
VALUE = 10_000  # bytes per value
KEYS = 2_000  # 20 MB written; 10 % of it kept


def _files(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def _fill_and_delete_most(store: durastate.Store) -> int:
    """Write ``KEYS`` values, delete 90 % of them; the bytes of values left."""
    for i in range(KEYS):
        store.kv.put(b"s", b"ns", b"%05d" % i, os.urandom(VALUE))
    store.kv.delete(b"s", b"ns", [b"%05d" % i for i in range(KEYS) if i % 10])
    return (KEYS // 10) * VALUE


def test_maintain_returns_the_space_of_deleted_data(tmp_path: Path) -> None:
    path = tmp_path / "space.db"
    with durastate.open(path) as store:
        live = _fill_and_delete_most(store)
        before = _files(path)
        assert before > 8 * live  # the deletes alone give nothing back
        report = store.maintain()
        after = _files(path)
        assert after <= 2 * live, (before, after, live)
        assert report.bytes_returned == before - after
        assert len(list(store.kv.scan(b"s", b"ns"))) == KEYS // 10  # the live data is all there
        assert store.engine.integrity_errors() == []


def test_maintain_vacuum_returns_the_space_of_a_file_without_incremental_auto_vacuum(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)  # a file made before durastate set auto_vacuum (or by another program)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    with durastate.open(path) as store:
        assert store.engine.one("PRAGMA auto_vacuum") == (0,)
        live = _fill_and_delete_most(store)
        store.maintain()  # truncates the WAL, but the file keeps its free pages without the mode
        assert path.stat().st_size > 8 * live
        report = store.maintain(vacuum=True)
        assert _files(path) <= 2 * live
        assert report.bytes_returned > 0
        assert store.engine.one("PRAGMA auto_vacuum") == (2,)  # the next maintain() needs no full pass


_FORBIDDEN_MODULES = {"pickle", "marshal", "shelve", "cPickle", "dill", "cloudpickle"}
_FORBIDDEN_CALLS = {"eval", "exec"}


def test_nothing_in_the_package_can_turn_stored_bytes_into_code() -> None:
    found = []
    # durastate.testing is the test kit, never a store's code path: its presence conformance test
    # pickles a returned value object in memory (users may), which stores nothing.
    files = sorted(f for f in PACKAGE.rglob("*.py") if f.relative_to(PACKAGE).parts[0] != "testing")
    assert len(files) > 50  # the whole package, not an empty folder
    for file in files:
        tree = ast.parse(file.read_text(), filename=str(file))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [(node.module or "").split(".")[0]]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FORBIDDEN_CALLS:
                names = [node.func.id]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "__import__":
                names = ["__import__"]
            else:
                continue
            found += [
                f"{file.relative_to(PACKAGE)}:{node.lineno}: {name}"
                for name in names
                if name in _FORBIDDEN_MODULES | _FORBIDDEN_CALLS | {"__import__"}
            ]
    assert found == []
