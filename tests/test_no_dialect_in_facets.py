"""Dialect lives in the engines only: no facet or compat module names one.

A facet writes one statement text per operation with tokens (``{blob}``,
``{key_text}``, ``{next_value:NAME}``, ...) and asks the engine for locks,
sequences and insert announcements; an engine fills them in. This test
keeps per-dialect SQL from creeping back into the modules above the engine.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import durastate
from durastate.facets import FACET_NAMES

PACKAGE = Path(durastate.__file__).parent
# store.py chooses the engine for a URL; engines/ and testing/ are below or
# beside the facets, not above them.
NOT_FACETS = {"store.py"}
# Every module of every facet package of the registry, and the modules at the top.
FACETS = sorted(
    [p for p in PACKAGE.glob("*.py") if p.name not in NOT_FACETS]
    + [p for name in FACET_NAMES for p in (PACKAGE / name).rglob("*.py")]
)
# A compat adapter split into a package (compat/vgi/) counts with all its modules.
COMPAT = sorted((PACKAGE / "compat").rglob("*.py"))
# Dialect names as code (a dict key, a comparison, a lookup), the word
# "dialect" anywhere. The compat adapters may name SQLite in prose and in the
# seeds' own API (compat.a2.sqlite()), but never key SQL by dialect.
FACET_PATTERN = re.compile(r"""["'](sqlite|postgresql|postgres)["']|dialect""", re.IGNORECASE)
COMPAT_PATTERN = re.compile(r"""["'](sqlite|postgresql|postgres)["']\s*:|dialect""", re.IGNORECASE)


def offending_lines(path: Path, pattern: re.Pattern[str]) -> list[str]:
    return [
        f"{path.name}:{number}: {line.strip()}"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]


def test_the_lists_are_not_empty() -> None:
    names = {p.relative_to(PACKAGE).parts[0] for p in FACETS if p.parent != PACKAGE}
    assert names == set(FACET_NAMES)
    assert COMPAT


@pytest.mark.parametrize("path", FACETS, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_facet_names_no_dialect(path: Path) -> None:
    assert offending_lines(path, FACET_PATTERN) == []


@pytest.mark.parametrize("path", COMPAT, ids=lambda p: str(p.relative_to(PACKAGE / "compat")))
def test_compat_module_keys_nothing_by_dialect(path: Path) -> None:
    assert offending_lines(path, COMPAT_PATTERN) == []


def test_the_pattern_catches_a_per_dialect_dict() -> None:
    sample = 'APPEND = {"sqlite": "INSERT ...", "postgresql": "INSERT ..."}'
    assert FACET_PATTERN.search(sample) and COMPAT_PATTERN.search(sample)
    assert FACET_PATTERN.search("limit = engine.dialect.no_limit")
