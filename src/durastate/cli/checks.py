"""What ``durastate doctor`` checks and its verdicts, from the facts and warnings ``info`` shows.

The engine reports facts, warnings and problems (``engine.tools.health``);
``doctor`` turns them into checks, each with a verdict (``ok``,
``warning``, ``problem``) and the detail behind it, so a healthy store
shows what was checked rather than nothing. A check applies when the
engine reports the fact it is about (a file's filesystem, a server's
standbys), never by engine name; a warning that matches no known check is
still shown, as an ``engine`` check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from durastate.engines.tools import Health
from durastate.store import SCHEMAS

from ._format import human_bytes

# PRAGMA synchronous and auto_vacuum answer numbers; shown by name.
SYNCHRONOUS_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
AUTO_VACUUM_NAMES = {0: "NONE", 1: "FULL", 2: "INCREMENTAL"}
FREE_PAGES_WARN = 0.25  # of the file: `durastate maintain` gives them back

# (check, the fact that says it applies, words of the engine's warnings that belong to it)
TOPICS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("filesystem", "filesystem", ("network filesystem",)),
    ("WAL size", "wal_bytes", ("the WAL is",)),
    ("writable", "file", ("not writable",)),
    ("attempt table", "attempt_rows", ("attempt table",)),
    ("failover", "standbys", ("standby", "failover", "synchronous", "replicat", "pooler", "recovery")),
)


@dataclass(frozen=True)
class Check:
    """One thing checked: ``verdict`` ``ok``, ``warning`` or ``problem``; ``detail``: what was seen."""

    check: str
    verdict: str
    detail: str


def named(facts: dict[str, Any]) -> dict[str, Any]:
    """``facts`` with SQLite's numeric ``synchronous`` and ``auto_vacuum`` by name (``NORMAL``, ``INCREMENTAL``)."""
    out = dict(facts)
    for key, names in (("synchronous", SYNCHRONOUS_NAMES), ("auto_vacuum", AUTO_VACUUM_NAMES)):
        if isinstance(out.get(key), int):
            out[key] = names.get(out[key], out[key])
    return out


def checks(h: Health) -> list[Check]:
    """The checks behind ``h``, in a fixed order: schema, journal, durability, free pages, the engine's topics,
    other warnings, integrity."""
    facts = named(h.facts)
    found: list[Check] = []
    expected = {s.facet: s.version for s in SCHEMAS}
    behind = {f: v for f, v in facts.get("schema", {}).items() if f in expected and v < expected[f]}
    if behind:
        found.append(Check("schema", "warning", f"older schema versions {behind}: open it writable once to migrate"))
    else:
        found.append(Check("schema", "ok", "every facet's schema is this durastate's"))
    if "journal_mode" in facts:
        journal = str(facts["journal_mode"]).lower()
        if journal in ("wal", "memory"):
            found.append(Check("journal mode", "ok", f"journal_mode {journal}"))
        else:
            detail = f"journal_mode {journal}: without WAL readers and the writer block each other"
            found.append(Check("journal mode", "warning", detail))
    if "synchronous" in facts:
        if facts["synchronous"] == "OFF":
            found.append(Check("durability", "warning", "synchronous OFF: a power loss can corrupt the file"))
        else:
            found.append(Check("durability", "ok", f"synchronous {facts['synchronous']}"))
    pages, free = facts.get("page_count"), facts.get("freelist_count")
    if isinstance(pages, int) and isinstance(free, int):
        if pages and free / pages > FREE_PAGES_WARN:
            found.append(Check("free pages", "warning", f"{free} of {pages} pages free: `durastate maintain`"))
        else:
            found.append(Check("free pages", "ok", f"{free} of {pages} pages free"))
    left = list(h.warnings)
    for name, fact, words in TOPICS:
        mine = [w for w in left if any(word in w for word in words)]
        left = [w for w in left if w not in mine]
        found += [Check(name, "warning", w) for w in mine]
        if not mine and fact in facts:
            found.append(Check(name, "ok", _ok_detail(name, facts)))
    found += [Check("engine", "warning", w) for w in left]
    found += [Check("integrity", "problem", p) for p in h.problems]
    if not h.problems:
        found.append(Check("integrity", "ok", str(facts.get("integrity", "ok"))))
    return found


def _ok_detail(name: str, facts: dict[str, Any]) -> str:
    if name == "filesystem":
        return f"{facts['filesystem'] or 'unknown'}: a local filesystem"
    if name == "WAL size":
        return human_bytes(facts["wal_bytes"])
    if name == "writable":
        return f"{facts['file']} is writable by this user"
    if name == "attempt table":
        return f"{facts['attempt_rows']:,} rows"
    return f"synchronous_commit {facts.get('synchronous_commit')}, standbys: {facts.get('standbys')}"


def verdict(found: list[Check]) -> str:
    """``problem`` when any check found one, else ``warning`` when any warned, else ``ok``."""
    verdicts = {c.verdict for c in found}
    return "problem" if "problem" in verdicts else "warning" if "warning" in verdicts else "ok"
