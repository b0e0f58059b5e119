"""Per-call cost of ``documents.write`` and ``documents.read`` on SQLite, for profiling (issue 25, docwrite).

``python bench/documents_calls.py [--op OP] [--calls N] [--callgrind-lib LIB]``

Writes a pydantic-ai-style record document (nested, with ``null`` values, ~600 bytes of JSON: what
``DurastateConversationStore.write_record`` stores) 100 times to warm up, then runs ``OP`` N times and
prints the CPU microseconds a call (``time.process_time``). The documents are built before the clock.

* ``write``: ``documents.write(key, doc, expect=rev)``, its own transaction;
* ``tx_write``: ``with store.transaction(): documents.write(key, doc, expect=rev)`` (write_record's
  shape: the store's transaction around the compare-and-swap);
* ``tx``: ``with store.transaction(): pass`` (BEGIN IMMEDIATE, COMMIT and their Python);
* ``tx_read``: ``with store.transaction(): documents.read(key)``;
* ``read``: ``documents.read(key)``.

``--callgrind-lib``: the ``cgtoggle.so`` of ``bench/langgraph_calls.py``'s docstring; under
``valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no`` the last dump then counts the N
calls only (``callgrind_annotate --inclusive=yes``: ``sqlite3_step`` is the SQL).
"""

from __future__ import annotations

import argparse
import ctypes
import tempfile
import time
from pathlib import Path
from typing import Any

import durastate


def _document(n: int) -> dict[str, Any]:
    return {
        "format": 1,
        "record": {
            "conversation_id": "c",
            "head_id": f"entry-{n:08d}",
            "revision": f"rev-{n:08d}",
            "title": None,
            "metadata": {},
            "scope": None,
            "branches": [],
            "created_at": "2026-12-05T14:00:00Z",
            "updated_at": f"2026-12-05T14:{n % 60:02d}:00Z",
            "usage": {"requests": n, "input_tokens": 10 * n, "output_tokens": None},
        },
        "uid": "0123456789abcdef",
        "lines": [2 * n + 1],
        "refs": [],
        "head": [f"entry-{n:08d}", "0123456789abcdef.0/" + str(2 * n + 1)],
    }


def main(op: str, calls: int, callgrind_lib: str | None) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-documents-calls-") as folder:
        store = durastate.open(f"sqlite://{Path(folder)}/d.db")
        documents = store.documents
        key = "pydantic-ai/records/c"
        revision = 0
        for n in range(100):
            revision = documents.write(key, _document(n), expect=revision)
        docs = [_document(100 + n) for n in range(calls)]
        toggle = ctypes.CDLL(callgrind_lib) if callgrind_lib else None
        if toggle is not None:
            toggle.cg_start()
        started = time.process_time()
        if op == "write":
            for doc in docs:
                revision = documents.write(key, doc, expect=revision)
        elif op == "tx_write":
            for doc in docs:
                with store.transaction():
                    revision = documents.write(key, doc, expect=revision)
        elif op == "tx":
            for _ in docs:
                with store.transaction():
                    pass
        elif op == "tx_read":
            for _ in docs:
                with store.transaction():
                    documents.read(key)
        else:
            for _ in docs:
                documents.read(key)
        cpu = time.process_time() - started
        if toggle is not None:
            toggle.cg_stop()
        print(f"{op}: {cpu * 1e6 / max(1, calls):.1f} us CPU a call ({calls} calls)")
        store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--op", choices=["write", "tx_write", "tx", "tx_read", "read"], default="tx_write")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--callgrind-lib", help="bench/langgraph_calls.py's cgtoggle.so: callgrind counts the calls")
    args = parser.parse_args()
    main(args.op, args.calls, args.callgrind_lib)
