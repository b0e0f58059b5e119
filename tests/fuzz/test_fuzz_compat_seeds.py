"""Well-typed calls behave like the seed: compat adapters run side by side with the seed's own code.

Random sequences of well-typed calls go to the adapter (on each engine) and
to the seed, and every result must match, refusals included (by kind).
Only seeds that run here can be compared:

* ``compat.functualize`` against functualize-state-sqlite 0.3.0's own
  ``SQLiteSubstrate`` (its sdist, fetched with pip once per venv by
  ``tests/test_functualize_upstream.py``'s fixture): ``read``, ``write``
  (``expect`` included), ``delete``, ``clear``, ``describe`` and writes
  inside ``lock``, on a small pool of keys so that calls collide. Payloads
  are the JSON the adapter stores as sent (its module docstring lists what
  it refuses instead: NaN, integers past 64 bits, lone surrogates, non-str
  keys, nesting past 255). Compared as documented: ``describe`` by presence
  and count (sizes are of the compact JSON here, of the seed's indented
  JSON there) and never for a prefix holding ``%``, ``_`` or capitals (the
  seed's ``LIKE`` takes them as wildcards and ignores ASCII case), ``clear``
  by the backup key (the path before ``#`` differs).

vgi-python needs Python 3.13 and experimental-a2's store needs Node 22.13
(``node:sqlite``), neither available where this suite runs; pi-durable's
SQLite storage (1.3.0) is not in the installed 1.4.0 wheel. Those adapters
are held to their seeds by the conformance suite and the upstream suites.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durastate.compat.functualize import SQLiteSubstrate

from ._machinery import PLAIN_JSON, Target, counting, fuzz_settings, fuzz_target, outcome

__all__ = ["fuzz_target", "upstream_suite"]

try:  # the fixture that fetches the seed's sdist (tests/ is on sys.path under pytest)
    from test_functualize_upstream import upstream_suite
except ImportError:  # pragma: no cover
    upstream_suite = None

KEYS = ["a", "b", "a/x", "a/y", "a.bak", "é/ü", "a/", "a_/x", "a%/y"]
TEXT = st.text(alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=6)
PAYLOADS = st.dictionaries(TEXT, PLAIN_JSON, max_size=3)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("read"), st.sampled_from(KEYS)),
        st.tuples(st.just("write"), st.sampled_from(KEYS), PAYLOADS, st.sampled_from([None, None, 0, 1, 2, 3, -1])),
        st.tuples(st.just("delete"), st.sampled_from(KEYS)),
        st.tuples(st.just("clear"), st.sampled_from(KEYS)),
        st.tuples(st.just("describe"), st.sampled_from([*KEYS, "a/", "", "z/"])),
        st.tuples(st.just("lock"), st.lists(st.sampled_from(KEYS), max_size=2), st.sampled_from(KEYS), PAYLOADS),
    ),
    min_size=1,
    max_size=12,
)


@pytest.fixture(scope="module")
def seed_substrate_class(upstream_suite: Path) -> type[Any]:
    """functualize-state-sqlite's own ``SQLiteSubstrate`` (imported from its sdist)."""
    source = upstream_suite / "src" / "functualize_state_sqlite" / "substrate.py"
    spec = importlib.util.spec_from_file_location("_seed_functualize_substrate", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.SQLiteSubstrate  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def substrate(fuzz_target: Target) -> Iterator[SQLiteSubstrate]:
    with SQLiteSubstrate(fuzz_target.url) as opened:
        yield opened


def _run(substrate: Any, ns: str, op: tuple[Any, ...]) -> Any:
    """One call, its result normalised to what the seed and the adapter must share."""
    name, key = op[0], op[1]
    try:
        if name == "read":
            stored = substrate.read(ns + key)
            return None if stored is None else (stored.data, stored.revision)
        if name == "write":
            return substrate.write(ns + key, op[2], expect=op[3])
        if name == "delete":
            return substrate.delete(ns + key)
        if name == "clear":
            moved = substrate.clear(ns + key)
            return None if moved is None else moved.rsplit("#", 1)[1]
        if name == "describe":
            text = substrate.describe(ns + key)
            if (ns + key).endswith("/"):
                return text if text == "empty" else text.split(",")[0]  # "<n> document(s)"
            return text.endswith("(absent)")
        with substrate.lock(*(ns + k for k in key)):
            return substrate.write(ns + op[2], op[3])
    except Exception as exc:  # compared by kind: both must refuse alike
        return ("refused", type(exc).__name__)


_example = iter(range(10**9))


def test_functualize_well_typed_calls_match_the_seed(
    fuzz_target: Target, substrate: SQLiteSubstrate, seed_substrate_class: type[Any], tmp_path: Path
) -> None:
    seed = seed_substrate_class(tmp_path / "seed.db")
    counting(fuzz_target.dialect, "functualize vs seed (calls)")

    @fuzz_settings(fuzz_target.dialect)
    @given(ops=OPS)
    def compare(ops: list[tuple[Any, ...]]) -> None:
        ns = f"ex{next(_example)}/"  # each example on keys of its own, in both stores
        for i, op in enumerate(ops):
            ours, theirs = _run(substrate, ns, op), _run(seed, ns, op)
            outcome(None)
            assert ours == theirs, (
                f"call {i} {op!r:.200}: adapter {ours!r:.200}, seed {theirs!r:.200} (calls {ops!r:.600})"
            )

    compare()
