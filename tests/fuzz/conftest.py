"""``DURASTATE_FUZZ_STATS=1``: after the run, how many inputs each entry point took and how each ended."""

from __future__ import annotations

import os
from typing import Any

from ._machinery import TALLY


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if os.environ.get("DURASTATE_FUZZ_STATS") != "1" or not TALLY:
        return
    write = terminalreporter.write_line
    terminalreporter.write_sep("=", "fuzz outcomes per entry point")
    totals: dict[str, int] = {}
    for (dialect, entry), counts in sorted(TALLY.items()):
        tried = sum(counts.values())
        totals[dialect] = totals.get(dialect, 0) + tried
        split = ", ".join(f"{k} {v}" for k, v in counts.most_common())
        write(f"{dialect:10} {entry:48} {tried:6}  {split}")
    for dialect, tried in sorted(totals.items()):
        entries = sum(1 for d, _ in TALLY if d == dialect)
        write(f"{dialect}: {entries} entry points, {tried} inputs")
