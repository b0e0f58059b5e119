"""``durastate._chord`` against pi-durable's own applier, ``pi_durable.delta.apply``.

The property test draws random JSON documents and random batches of ops
(well-formed and malformed, paths that resolve and paths that do not,
reserved segments, indexes at and past the end, astral and lone-surrogate
text) and checks, op by op, that both appliers agree: the same value after
every op, or both refuse. One difference is expected and asserted as such:
pi-durable's ``s`` with an integer segment on an object stores an integer
key (not JSON); durastate refuses it. The fixed cases below pin every rule
without the package, so they run wherever durastate does.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durastate import InvalidRequest
from durastate._chord import MAX_DELTA_OPERATIONS, RESERVED_SEGMENTS, DeltaPathError, apply, check_op, check_ops, fold

try:
    from pi_durable import delta as upstream
except ImportError:  # pragma: no cover - the [test] extra pins pi-durable-python
    upstream = None  # type: ignore[assignment]

needs_upstream = pytest.mark.skipif(upstream is None, reason="pi-durable-python is not installed")

# -- strategies -------------------------------------------------------------------

TEXT = st.text(alphabet=st.sampled_from(["a", "b", "é", "😀", "\ud800", "\udfff", " "]), max_size=6)
KEYS = st.sampled_from(["a", "b", "c", "0", "", "😀", "\ud800"])
SCALARS = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-2, 2, allow_nan=False) | TEXT
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=12,
)
DOCS = st.dictionaries(KEYS, JSON, max_size=5)


def _paths(doc: Any) -> list[list[Any]]:
    """Every path in ``doc`` (to containers and leaves), the root included."""
    out: list[list[Any]] = [[]]
    stack: list[tuple[list[Any], Any]] = [([], doc)]
    while stack:
        path, value = stack.pop()
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, child in items:
            out.append([*path, key])
            stack.append(([*path, key], child))
    return out


def _at(doc: Any, path: list[Any]) -> Any:
    for segment in path:
        doc = doc[segment]
    return doc


@st.composite
def paths(draw: st.DrawFn, doc: Any, want: type | None = None) -> list[Any]:
    """A path into ``doc``, often an existing one (to a ``want`` if any), sometimes extended or broken."""
    candidates = _paths(doc)
    if want is not None and draw(st.integers(0, 3)) > 0:
        candidates = [p for p in candidates if isinstance(_at(doc, p), want)] or candidates
    path = list(draw(st.sampled_from(candidates)))
    twist = draw(st.integers(0, 9))
    if twist == 0:
        path.append(draw(KEYS))
    elif twist == 1:
        path.append(draw(st.integers(0, 4)))
    elif twist == 2 and path:
        path[-1] = draw(st.sampled_from([*RESERVED_SEGMENTS, -1, True, 1.5, None, "x"]))
    elif twist == 3 and path:
        path.pop()
    return path


@st.composite
def ops(draw: st.DrawFn, doc: Any) -> list[Any]:
    verb = draw(st.sampled_from(["r", "s", "d", "a", "t", "p", "m", "s", "a", "t", "p", "m", "?"]))
    if verb == "r":
        return ["r", draw(DOCS if draw(st.booleans()) else JSON)]
    want = {"a": str, "t": str, "p": list, "m": list}.get(verb)
    path = draw(paths(doc, want))
    if verb == "s":
        return ["s", path, draw(JSON)]
    if verb == "d":
        return ["d", path]
    if verb == "a":
        return ["a", path, draw(TEXT | st.integers(0, 1))]
    if verb == "t":
        return ["t", path, draw(st.integers(-1, 8))]
    if verb == "p":
        return ["p", path, draw(st.integers(-1, 6)), draw(st.integers(0, 6)), draw(st.lists(JSON, max_size=3))]
    if verb == "m":
        target = _at(doc, path) if path in _paths(doc) else None
        n = len(target) if isinstance(target, list) and draw(st.integers(0, 4)) > 0 else draw(st.integers(0, 5))
        perm = draw(st.permutations(list(range(n))))
        if draw(st.integers(0, 5)) == 0:
            perm = [*perm, 0]  # not a bijection
        return ["m", path, perm]
    return [draw(st.sampled_from(["x", "", 1, None])), path]


def _has_int_key(value: Any) -> bool:
    if isinstance(value, dict):
        return any(not isinstance(k, str) or _has_int_key(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_int_key(v) for v in value)
    return False


def _theirs(doc: Any, op: list[Any]) -> tuple[bool, Any]:
    try:
        return True, upstream.apply(copy.deepcopy(doc), [copy.deepcopy(op)])
    except Exception:  # the package raises TypeError, PathError, UnsafePathError, KeyError, IndexError
        return False, None


def _ours(doc: Any, op: list[Any]) -> tuple[bool, Any]:
    try:
        check_op("op", op)
        return True, apply(copy.deepcopy(doc), [op])
    except (InvalidRequest, DeltaPathError):
        return False, None


@needs_upstream
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_op_by_op_same_as_pi_durable(data: st.DataObject) -> None:
    doc: Any = data.draw(DOCS)
    for _ in range(data.draw(st.integers(1, 8))):
        op = data.draw(ops(doc))
        before = copy.deepcopy(op)
        their_ok, their_value = _theirs(doc, op)
        our_ok, our_value = _ours(doc, op)
        assert op == before  # the op is never changed
        if their_ok and _has_int_key(their_value):
            # pi-durable stored an integer object key (s with an index on an object): refused here.
            assert not our_ok, (doc, op)
            continue
        assert our_ok == their_ok, (doc, op, their_value, our_value)
        if our_ok:
            assert our_value == their_value, (doc, op)
            doc = our_value


@needs_upstream
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_whole_batches_same_as_pi_durable(data: st.DataObject) -> None:
    """A batch applies exactly when the package applies it, to the same value."""
    doc: Any = data.draw(DOCS)
    batch: list[Any] = []
    shadow: Any = copy.deepcopy(doc)
    for _ in range(data.draw(st.integers(0, 10))):
        op = data.draw(ops(shadow))
        batch.append(op)
        ok, value = _ours(shadow, op)
        if ok:
            shadow = value
    their_ok, their_value = _theirs_batch(doc, batch)
    try:
        check_ops("ops", batch)
        ours: Any = apply(copy.deepcopy(doc), batch)
        our_ok = True
    except (InvalidRequest, DeltaPathError):
        our_ok, ours = False, None
    if their_ok and _has_int_key(their_value):
        assert not our_ok
        return
    assert our_ok == their_ok, (doc, batch)
    if our_ok:
        assert ours == their_value


def _theirs_batch(doc: Any, batch: list[Any]) -> tuple[bool, Any]:
    """The package's result for the batch; an integer object key anywhere on the way counts as in the result."""
    value, int_key = copy.deepcopy(doc), False
    try:
        for op in batch:
            value = upstream.apply(value, [copy.deepcopy(op)])
            int_key = int_key or _has_int_key(value)
    except Exception:
        return False, None
    return True, {0: "an integer key was stored on the way"} if int_key else value


@needs_upstream
def test_same_constants_as_pi_durable() -> None:
    assert upstream.MAX_DELTA_OPERATIONS == MAX_DELTA_OPERATIONS
    assert upstream.RESERVED_SEGMENTS == RESERVED_SEGMENTS


@needs_upstream
def test_a_draft_edit_of_astral_text_replays_to_the_same_text() -> None:
    """pi-durable's draft writer counts ``t`` in code points; so does the applier here."""
    from pi_durable.session.drafts import DocumentDraft

    draft = DocumentDraft({"text": "😀😀abc-tail"})
    draft["text"] = "tail and more 😀"
    prepared = draft._prepare()
    assert [op[0] for op in prepared.ops] == ["t", "a"]
    assert apply({"text": "😀😀abc-tail"}, prepared.ops) == prepared.value == {"text": "tail and more 😀"}


# -- fixed cases (no package needed) -------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "batch", "want"),
    [
        ({"a": 1}, [["r", {"b": [1]}]], {"b": [1]}),
        ({"a": 1}, [["s", ["b"], {"c": 2}], ["s", ["b", "c"], 3]], {"a": 1, "b": {"c": 3}}),
        ({"l": [1, 2, 3]}, [["s", ["l", 2], 9]], {"l": [1, 2, 9]}),
        ({"a": 1}, [["d", ["a"]], ["d", ["missing"]]], {}),
        ({"a": 1}, [["d", [0]]], {"a": 1}),  # an index names no object member: nothing removed
        ({"l": [1, 2, 3]}, [["d", ["l", 0]]], {"l": [2, 3]}),
        ({"t": "ab"}, [["a", ["t"], "cd"]], {"t": "abcd"}),
        ({"t": "😀😀x"}, [["t", ["t"], 1]], {"t": "😀x"}),  # one character, not two UTF-16 units
        ({"t": "\ud800x"}, [["t", ["t"], 1]], {"t": "x"}),
        ({"t": "ab"}, [["t", ["t"], 9]], {"t": ""}),
        ({"l": [1, 2, 3]}, [["p", ["l"], 1, 1, [7, 8]]], {"l": [1, 7, 8, 3]}),
        ({"l": [1]}, [["p", ["l"], 5, 9, [2]]], {"l": [1, 2]}),  # clamped, as a slice
        ({"l": [[0]]}, [["p", ["l", 0], 0, 1, []]], {"l": [[]]}),
        ({"l": ["a", "b", "c"]}, [["m", ["l"], [2, 0, 1]]], {"l": ["c", "a", "b"]}),
        ({"l": []}, [["m", ["l"], []]], {"l": []}),
        ({"x": {"y": ["s"]}}, [["a", ["x", "y", 0], "!"]], {"x": {"y": ["s!"]}}),
        ({"a": 1}, [], {"a": 1}),
    ],
)
def test_fixed_cases(doc: dict[str, Any], batch: list[Any], want: Any) -> None:
    check_ops("ops", batch)
    assert apply(copy.deepcopy(doc), batch) == want


@pytest.mark.parametrize(
    ("doc", "op"),
    [
        ({"a": 1}, ["a", ["a"], "x"]),
        ({"a": 1}, ["a", ["missing"], "x"]),
        ({"a": 1}, ["t", ["a"], 1]),
        ({"a": 1}, ["s", ["missing", "b"], 1]),
        ({"a": 1}, ["s", [0], 1]),
        ({"l": [1]}, ["s", ["l", 1], 2]),  # at the end: no element to set
        ({"l": [1]}, ["s", ["l", 5], 2]),
        ({"l": [1]}, ["s", ["l", "x"], 2]),
        ({"l": [1]}, ["d", ["l", 1]]),
        ({"l": [1]}, ["a", ["l", 1], "x"]),
        ({"a": 1}, ["p", [], 0, 0, []]),
        ({"a": 1}, ["p", ["a"], 0, 0, []]),
        ({"l": [1, 2]}, ["m", ["l"], [0]]),
        ({"a": "s"}, ["s", ["a", "b"], 1]),
    ],
)
def test_ops_that_do_not_apply(doc: dict[str, Any], op: list[Any]) -> None:
    check_op("op", op)
    with pytest.raises(DeltaPathError):
        apply(copy.deepcopy(doc), [op])


@pytest.mark.parametrize(
    "op",
    [
        ("s", ["a"], 1),
        [],
        ["x", ["a"]],
        [1, ["a"]],
        ["r"],
        ["r", 1, 2],
        ["s", ["a"]],
        ["s", [], 1],
        ["d", []],
        ["a", [], "x"],
        ["t", [], 1],
        ["s", "a", 1],
        ["s", ["a", "__proto__"], 1],
        ["d", ["constructor"]],
        ["p", ["prototype"], 0, 0, []],
        ["m", ["__proto__"], []],
        ["s", [-1], 1],
        ["s", [True], 1],
        ["s", [1.0], 1],
        ["s", [None], 1],
        ["a", ["a"], 1],
        ["t", ["a"], -1],
        ["t", ["a"], 1.0],
        ["p", [], -1, 0, []],
        ["p", [], 0, -1, []],
        ["p", [], 0, 0, (1,)],
        ["p", [], 0, 0],
        ["m", [], [0, 0]],
        ["m", [], [1]],
        ["m", [], "01"],
    ],
)
def test_malformed_ops_are_refused(op: Any) -> None:
    with pytest.raises(InvalidRequest):
        check_op("ops[0]", op)


def test_payloads_are_copied() -> None:
    payload = {"c": 1}
    op = ["s", ["b"], payload]
    doc = apply({}, [op, ["s", ["b", "c"], 2]])
    assert doc == {"b": {"c": 2}} and payload == {"c": 1}
    items = [[1]]
    doc = apply({"l": []}, [["p", ["l"], 0, 0, items], ["s", ["l", 0, 0], 5]])
    assert doc == {"l": [[5]]} and items == [[1]]


def test_fold_replaces_a_long_batch_by_its_result() -> None:
    short = [["s", ["n"], i] for i in range(MAX_DELTA_OPERATIONS)]
    assert fold(short, {"n": 1}) is short
    long = [*short, ["s", ["n"], -1]]
    assert fold(long, {"n": -1}) == [["r", {"n": -1}]]
