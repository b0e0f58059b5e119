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

import asyncio
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durastate.compat.functualize import SQLiteSubstrate
from durastate.testing.conformance.records import (
    base,
    change,
    conv_scope,
    conversation,
    copy_doc,
    create,
    delta,
    doc_record,
    entry,
    retire,
    submission,
    task,
)

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
        st.tuples(st.just("write"), st.sampled_from(KEYS), PAYLOADS, st.sampled_from([None] * 6 + [0, 1, 2, 3, -1])),
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


def _kind(op: tuple[Any, ...], result: Any) -> str:
    """How a compared call ended, for the tally: its name, and refused / nothing / an answer."""
    if isinstance(result, tuple) and result[:1] == ("refused",):
        return f"{op[0]}: refused"
    return f"{op[0]}: {'nothing' if result in (None, False, 'empty') else 'answered'}"


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
            outcome(None, _kind(op, theirs))
            assert ours == theirs, (
                f"call {i} {op!r:.200}: adapter {ours!r:.200}, seed {theirs!r:.200} (calls {ops!r:.600})"
            )

    compare()


# -- compat.pi_durable against pi-durable's reference storage ----------------------------

CONVS = st.sampled_from([1, 2, 8, 9])  # 9 never exists
SMALL_IDS = st.integers(1, 14)  # 1..8 exist after BOOTSTRAP
POINT = st.one_of(st.just("current"), st.integers(1, 6))
SCOPES = st.one_of(st.just({"kind": "session"}), CONVS.map(conv_scope))
VALUES = st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(0, 3), max_size=2)
DOC_WRITE = st.one_of(
    st.builds(
        lambda i, s, k, v: create(doc_record(i, scope=s, key=k), base(v)),
        SMALL_IDS,
        SCOPES,
        st.sampled_from([None, "k", "j"]),
        VALUES,
    ),
    st.builds(lambda i, v, n: change(i, base(v, version=n)), SMALL_IDS, VALUES, st.integers(1, 2)),
    st.builds(
        lambda i, k, v, n: change(i, delta([["s", [k], v]], version=n)),
        SMALL_IDS,
        st.sampled_from(["a", "z"]),
        st.integers(0, 3),
        st.integers(1, 2),
    ),
    st.builds(retire, SMALL_IDS),
    st.builds(
        lambda i, s, src, at: copy_doc(doc_record(i, scope=s, key="k"), src, at), SMALL_IDS, SCOPES, SMALL_IDS, POINT
    ),
)
RECORD_WRITE = st.one_of(
    st.builds(conversation, CONVS),
    st.builds(lambda i, p, a: conversation(i, parent=(p, a)), st.integers(7, 9), CONVS, SMALL_IDS),
    st.builds(lambda i, c, h: entry(i, c, head=h), SMALL_IDS, CONVS, st.sampled_from([None, "h"])),
    st.builds(
        lambda i, c, s, b: task(i, c, status=s, bg=b),
        SMALL_IDS,
        CONVS,
        st.sampled_from(["running", "terminal"]),
        st.booleans(),
    ),
    st.builds(
        lambda i, c, r, s: submission(i, c, request_id=r, status=s),
        SMALL_IDS,
        CONVS,
        st.sampled_from([None, "r1", "r2"]),
        st.sampled_from(["queued", "done"]),
    ),
)
ORDERS = st.sampled_from([None, "ascending", "descending"])
CURSOR = st.one_of(
    st.none(), st.builds(lambda a, o: {"after": a, "order": o}, SMALL_IDS, st.sampled_from(["ascending", "descending"]))
)


def _with_order(query: dict[str, Any], order: str | None) -> dict[str, Any]:
    return query if order is None else {**query, "order": order}


READ_OPS = st.one_of(
    st.tuples(st.sampled_from(["conversation", "task", "submission"]), SMALL_IDS),
    st.tuples(st.just("entry"), SMALL_IDS),
    st.tuples(st.just("entry"), st.integers(1, 9), SMALL_IDS, st.just("ctx")),
    st.tuples(st.just("find_latest_head_marker"), st.integers(1, 9), st.one_of(st.none(), SMALL_IDS)),
    st.tuples(st.just("submission_by_request"), CONVS, st.sampled_from(["r1", "r2", "r3"])),
    st.tuples(
        st.just("scan_entries"),
        st.builds(_with_order, st.builds(lambda c: {"conversationId": c}, st.integers(1, 9)), ORDERS),
        st.integers(1, 4),
        CURSOR,
    ),
    st.tuples(st.just("scan_conversations"), st.builds(_with_order, st.just({}), ORDERS), st.integers(1, 4), CURSOR),
    st.tuples(
        st.just("scan_tasks"),
        st.builds(_with_order, st.sampled_from([{}, {"status": "terminal"}, {"background": True}]), ORDERS),
        st.integers(1, 4),
        CURSOR,
    ),
    st.tuples(
        st.just("scan_submissions"),
        st.builds(_with_order, st.sampled_from([{}, {"status": "queued"}, {"conversationId": 2}]), ORDERS),
        st.integers(1, 4),
        CURSOR,
    ),
    st.tuples(
        st.just("find_document"),
        st.builds(
            lambda s, k: {"kind": "notes", "scope": s, **({} if k is None else {"key": k})},
            SCOPES,
            st.sampled_from([None, "k", "j"]),
        ),
        POINT,
    ),
    st.tuples(st.just("document"), st.one_of(st.just(7), SMALL_IDS), POINT),
    st.tuples(
        st.just("scan_documents"),
        st.builds(lambda s, at: {"scope": s, "at": at}, SCOPES, POINT),
        st.integers(1, 4),
        st.one_of(st.none(), st.builds(lambda a: {"after": a}, SMALL_IDS)),
    ),
)
# Every sequence starts from this commit, so later calls meet records that exist.
BOOTSTRAP = (
    "commit",
    [
        conversation(1),
        conversation(2),
        entry(3, 1),
        entry(4, 1, head="h"),
        task(5, 1),
        submission(6, 1, request_id="r1"),
        create(doc_record(7, scope=conv_scope(1), key="k"), base({"a": 1})),
        conversation(8, parent=(1, 3)),
    ],
)
PI_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("commit"), st.lists(st.one_of(RECORD_WRITE, DOC_WRITE), min_size=1, max_size=2)),
        READ_OPS,
    ),
    min_size=1,
    max_size=14,
).map(lambda ops: [BOOTSTRAP, *ops])


async def _pi_run(storage: Any, op: tuple[Any, ...]) -> Any:
    """One call; a refusal as ("refused", kind) with kind "request" (StorageRequestError) or "commit"."""
    from pi_durable.errors import StorageRequestError as TheirRequestError

    name, args = op[0], list(op[1:])
    try:
        if name == "commit":
            return await storage.commit(args[0], None)
        if name == "entry" and args[-1:] == ["ctx"]:  # entry(conversation_id, id, context)
            return await storage.entry(args[0], args[1], None)
        return await getattr(storage, name)(*args, None)
    except TheirRequestError:
        return ("refused", "request")
    except (RuntimeError, ValueError) as exc:
        return ("refused", "commit" if name == "commit" else type(exc).__name__)
    except LookupError:  # MemoryStorage's own slip (scan_tasks of a status it never saw: KeyError)
        return UNANSWERED


UNANSWERED = ("the reference storage failed",)


def test_pi_durable_well_typed_calls_match_pi_durables_reference_storage(fuzz_target: Target, tmp_path: Path) -> None:
    from pi_durable.storage.memory import MemoryStorage

    from durastate.compat.pi_durable import SqliteStorage
    from durastate.testing import plugin, postgres_server

    counting(fuzz_target.dialect, "pi_durable vs MemoryStorage (calls)")
    fresh = iter(range(10**9))

    def fresh_url() -> tuple[str, Any]:
        if fuzz_target.dialect == "sqlite":
            return f"sqlite://{tmp_path / f'{next(fresh)}.db'}", lambda: None
        base_url = plugin._postgres_base_url()
        url, schema = postgres_server.create_schema(base_url)
        return url, lambda: postgres_server.drop_schema(base_url, schema)

    @fuzz_settings(fuzz_target.dialect)
    @given(ops=PI_OPS)
    def compare(ops: list[tuple[Any, ...]]) -> None:
        url, drop = fresh_url()

        async def main() -> None:
            ours, theirs = await SqliteStorage.open(url), MemoryStorage()
            try:
                for i, op in enumerate(ops):
                    got, expected = await _pi_run(ours, op), await _pi_run(theirs, op)
                    outcome(None, _kind(op, expected))
                    assert got == expected or (expected is UNANSWERED and op[0] != "commit"), (
                        f"call {i} {op!r:.300}: adapter {got!r:.300}, pi-durable {expected!r:.300} (calls {ops!r:.800})"
                    )
            finally:
                await ours.close(None)

        try:
            asyncio.run(main())
        finally:
            drop()

    compare()
