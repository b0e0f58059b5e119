"""Build a copy of ``src`` with the queues facet and the SQLite engine compiled by mypyc: what a compiled hot path buys.

    .venv/bin/python bench/mypyc_trial.py [--out DIR]
    bench/queue_cpu.py --src src --src DIR ...          (CPU time, both trees taking turns)
    valgrind --tool=callgrind ... bench/queue_cpu.py --only queue --ops N --src DIR   (instructions: see there)

Stop 29 left a compiled hot path open ("mypyc refuses SqliteEngine's two
mixins"); stop 33 measured it. mypyc compiles these modules only after the
reshaping below, applied here to a copy as exact text replacements (each
must match once, or the script stops: the tree has moved and the trial
needs reading again). None of it is in ``src``:

* ``SqliteEngine(ChangeNotifications, SharedWrites)``, a diamond over
  ``SqliteTransactions``, becomes a chain (``ChangeNotifications`` over
  ``SharedWrites``): the same method order, and mypyc allows one base;
* ``__slots__`` go (a native class has fixed attributes anyway);
* attributes a subclass declares narrower than its base (``_tls``,
  ``Transaction._engine`` / ``_state``) are declared once, as ``Any``;
* method aliases (``send = execute``, ``executemany = execute``) become
  methods;
* the ``threading.local`` classes (``PerThread``, ``TransactionState``, and
  ``TransactionFields`` under them) move to a module left interpreted, and
  ``ThreadState`` is declared non-native: compiled natively, a
  ``threading.local`` subclass crashes the process on its first attribute
  read (a segfault in ``durastate.open``), and marked non-native in a
  compiled module its C does not build (``CPyModule__thread`` undeclared).

Prints the folder holding the compiled ``durastate``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src" / "durastate"

COMPILED = (
    "queues/facet.py",
    "engines/sqlite.py",
    "engines/sqlite_writes.py",
    "engines/sqlite_transaction.py",
    "engines/sqlite_connections.py",
    "engines/sqlite_notify.py",
    "engines/base.py",
    "engines/transaction.py",
)

NON_NATIVE = "from mypy_extensions import mypyc_attr\n"

# (file, old text, new text): each old text must occur exactly once.
EDITS: tuple[tuple[str, str, str], ...] = (
    (
        "engines/sqlite.py",
        "class SqliteEngine(ChangeNotifications, SharedWrites):",
        "class SqliteEngine(ChangeNotifications):",
    ),
    ("engines/sqlite.py", "    _tls: PerThread[ThreadState]\n\n    def blob_binding", "    def blob_binding"),
    (
        "engines/sqlite.py",
        "    send = execute  # type: ignore[assignment]\n",
        "    def send(self, sql: str, params: Params = ()) -> None:\n        self.execute(sql, params)\n",
    ),
    (
        "engines/sqlite_notify.py",
        "from .sqlite_transaction import SqliteTransactions\n",
        "from .sqlite_writes import SharedWrites\n",
    ),
    (
        "engines/sqlite_notify.py",
        "class ChangeNotifications(SqliteTransactions):",
        "class ChangeNotifications(SharedWrites):",
    ),
    ("engines/sqlite_transaction.py", '    __slots__ = ("doomed",)\n', ""),
    ("engines/sqlite_transaction.py", "    __slots__ = ()\n", ""),
    ("engines/sqlite_transaction.py", "    _engine: SqliteTransactions\n    _state: ThreadState\n", ""),
    ("engines/sqlite_transaction.py", "    _tls: PerThread[ThreadState]\n", ""),
    (
        "engines/sqlite_transaction.py",
        "    executemany = execute\n",
        "    def executemany(self, sql: str, params: Any = ()) -> sqlite3.Cursor:\n"
        "        raise Refused(self.doomed)\n",
    ),
    (
        "engines/sqlite_transaction.py",
        "class ThreadState(TransactionFields):",
        "@mypyc_attr(native_class=False)\nclass ThreadState(TransactionFields):",
    ),
    (
        "engines/sqlite_transaction.py",
        "from __future__ import annotations\n",
        "from __future__ import annotations\n\n" + NON_NATIVE,
    ),
    ("engines/sqlite_connections.py", '    __slots__ = ("_queue", "holder", "lock", "turns")\n', ""),
    ("engines/sqlite_connections.py", '    __slots__ = ("conn", "cursor", "guard")\n', ""),
    ("engines/sqlite_connections.py", '    __slots__ = ("by_thread", "shared", "spare", "writers")\n', ""),
    ("engines/base.py", "    _tls: PerThread[Any] | SharedState\n", "    _tls: Any\n"),
    ("engines/transaction.py", '    __slots__ = ("state",)\n', ""),
    (
        "engines/transaction.py",
        '    __slots__ = ("_engine", "_level", "_lock", "_read", "_state")\n',
        "    _engine: Any\n    _state: Any\n",
    ),
)


def _edit(root: Path, name: str, old: str, new: str) -> None:
    path = root / name
    text = path.read_text()
    if text.count(old) != 1:
        raise SystemExit(
            f"{name}: expected one {old!r}, found {text.count(old)}: read the trial against the tree again"
        )
    path.write_text(text.replace(old, new))


def _split_thread_state(root: Path) -> None:
    """Move ``TransactionFields``, ``TransactionState``, ``PerThread`` to ``engines/thread_state.py``, interpreted."""
    path = root / "engines" / "transaction.py"
    text = path.read_text()
    start, end = text.index("class TransactionFields:"), text.index("class SharedState:")
    moved = text[start:end]
    kept = text[:start] + "from .thread_state import PerThread, TransactionFields, TransactionState\n\n\n" + text[end:]
    # Transaction's _engine and _state are declared Any (EDITS): Any imported unless it is already.
    if " Any" not in kept.split("from typing import", 1)[1].split("\n", 1)[0]:
        kept = kept.replace("from typing import ", "from typing import Any, ", 1)
    path.write_text(kept)
    header = (
        "from __future__ import annotations\n\nimport threading\nfrom collections.abc import Callable\n"
        "from typing import Generic, TypeVar\n\nfrom ..errors import DurastateError\n\n\n"
    )
    (root / "engines" / "thread_state.py").write_text(header + moved)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="the folder to build in (default: a new temporary one)")
    args = parser.parse_args()
    out: Path = args.out or Path(tempfile.mkdtemp(prefix="durastate-mypyc-"))
    root = out / "durastate"
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(SRC, root, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    for name, old, new in EDITS:
        _edit(root, name, old, new)
    _split_thread_state(root)
    mypyc = Path(sys.executable).with_name("mypyc")
    built = subprocess.run(
        [str(mypyc), *(f"durastate/{name}" for name in COMPILED)], cwd=out, capture_output=True, text=True
    )
    if built.returncode != 0 or len(list(root.rglob("*.so"))) < len(COMPILED):
        sys.stdout.write(built.stdout[-4000:] + built.stderr[-4000:])
        raise SystemExit("mypyc did not build every module")
    check = subprocess.run(
        [
            sys.executable,
            "-c",
            "import durastate, tempfile, os; from durastate.engines import sqlite;"
            " assert sqlite.__file__.endswith('.so'), sqlite.__file__;"
            " s = durastate.open(os.path.join(tempfile.mkdtemp(), 'x.db')); s.queues.push('q', [b'a']);"
            " s.queues.claim('q').ack(); s.close()",
        ],
        env={"PYTHONPATH": str(out), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    if check.returncode != 0:
        sys.stdout.write(check.stderr[-4000:])
        raise SystemExit("the compiled copy does not run a push, claim and ack")
    print(out)


if __name__ == "__main__":
    main()
