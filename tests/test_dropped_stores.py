"""A store dropped without ``close()`` leaves nothing behind once collected: no thread, no descriptor, no engine.

A long-lived service that opens a store per task and, on some path, forgets
to close it must not accumulate what each store held (docs/decisions.md,
"leak-audit"). Counted, not timed: the threads a store started, the
descriptors naming its file, whether its engine is still alive. A thread is
joined with a deadline that only a failure reaches.
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest

import durastate


def _descriptors_naming(path: Path) -> list[str]:
    """What this process's open descriptors point at, of ``path`` and the files SQLite keeps beside it."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the listing's own descriptor, closed since
            continue
        if target.startswith(str(path)):
            found.append(target)
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd (Linux)")
def test_a_file_store_dropped_unclosed_keeps_no_descriptor_of_its_file(tmp_path: Path) -> None:
    path = tmp_path / "dropped.db"
    for _ in range(3):
        store = durastate.open(path)
        store.kv.put(b"s", b"n", b"k", b"v")  # the first write looks at the WAL: the -shm file is opened for it
        assert any(target.startswith(f"{path}-shm") for target in _descriptors_naming(path))
        del store
        gc.collect()
        assert _descriptors_naming(path) == []
