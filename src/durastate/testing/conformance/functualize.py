"""Conformance: ``durastate.compat.functualize``, clause by clause against the seed.

The seed is functualize-state-sqlite 0.3.0 (``SQLiteSubstrate`` and
``SQLiteStatePlugin``). Each test names the clause of the seed it pins; the
deliberate differences listed in the module docstring of
``durastate.compat.functualize`` have tests of their own. Every test runs on
every engine (the substrate is opened on the ``store_url`` / ``shared_url``
of the test); the plugin tests use a stand-in app and stand-in functualize
modules, since functualize itself is not a dependency.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

import durastate
from durastate.compat import functualize as compat
from durastate.compat.functualize import SQLiteStatePlugin, SQLiteSubstrate, Stored, SubstrateUnreadableError

from .documents import DOCS, MODEL_KEYS, NOT_AN_OBJECT, UNDECODABLE, plant, run_threads
from .multiprocess import ANY_METHOD, _Workers

__all__ = [
    "TestFunctualizeAcrossProcesses",
    "TestFunctualizeBadInput",
    "TestFunctualizeClear",
    "TestFunctualizeDescribe",
    "TestFunctualizeLock",
    "TestFunctualizeModel",
    "TestFunctualizeOpen",
    "TestFunctualizePlugin",
    "TestFunctualizeReadWrite",
]


class _WithSubstrate:
    """Gives each test a ``substrate`` on the test's engine (a base, so ``import *`` carries the fixture)."""

    @pytest.fixture
    def substrate(self, store_url: str) -> Iterator[SQLiteSubstrate]:
        s = SQLiteSubstrate(store_url)
        yield s
        s.close()


def stored_size(s: SQLiteSubstrate, key: str) -> int:
    raw = s.store.documents.read_raw(key)
    assert raw is not None
    return len(raw.payload)


# -- opening ---------------------------------------------------------------------


class TestFunctualizeOpen(_WithSubstrate):
    def test_a_path_creates_its_folder_and_is_the_path_property(self, tmp_path: Path) -> None:
        target = tmp_path / "deep" / "er" / "state.db"
        with SQLiteSubstrate(target) as s:
            assert s.path == target
            assert isinstance(s.path, Path)
            s.write("k", {"v": 1})
        assert target.exists()

    def test_a_str_path_is_a_path_too(self, tmp_path: Path) -> None:
        target = tmp_path / "sub" / "state.db"
        with SQLiteSubstrate(str(target)) as s:
            assert s.path == target
            s.write("k", {"v": 1})
        with SQLiteSubstrate(target) as again:
            assert again.read("k") == Stored({"v": 1}, 1)

    def test_a_sqlite_url_names_its_file(self, tmp_path: Path) -> None:
        target = tmp_path / "u" / "state.db"
        with SQLiteSubstrate(f"sqlite://{target}") as s:
            assert s.path == target
            s.write("k", {"v": 1})
        assert target.exists()

    def test_any_store_url_works(self, substrate: SQLiteSubstrate) -> None:
        substrate.write("k", {"v": 1})
        assert substrate.read("k") == Stored({"v": 1}, 1)
        assert str(substrate.path)

    def test_importing_the_module_imports_nothing_from_functualize(self) -> None:
        code = (
            "import sys, durastate.compat.functualize as f; "
            "assert not [m for m in sys.modules if m.split('.')[0] == 'functualize'], sys.modules.keys()"
        )
        subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# -- read / write ----------------------------------------------------------------


class TestFunctualizeReadWrite(_WithSubstrate):
    def test_read_of_absent_key_is_none(self, substrate: SQLiteSubstrate) -> None:
        assert substrate.read("missing") is None

    def test_write_without_expect_returns_true_and_counts_revisions(self, substrate: SQLiteSubstrate) -> None:
        assert substrate.write("k", {"v": 1}) is True
        assert substrate.read("k") == Stored({"v": 1}, 1)
        assert substrate.write("k", {"v": 2}) is True
        got = substrate.read("k")
        assert got == Stored({"v": 2}, 2)
        assert isinstance(got, Stored) and type(got.revision) is int

    def test_write_with_the_current_revision_swaps(self, substrate: SQLiteSubstrate) -> None:
        substrate.write("k", {"v": 1})
        assert substrate.write("k", {"v": 2}, expect=1) is True
        assert substrate.read("k") == Stored({"v": 2}, 2)

    def test_write_with_a_stale_revision_is_false_and_changes_nothing(self, substrate: SQLiteSubstrate) -> None:
        substrate.write("k", {"v": 1})
        substrate.write("k", {"v": 2})
        assert substrate.write("k", {"v": "lost"}, expect=1) is False
        assert substrate.read("k") == Stored({"v": 2}, 2)

    def test_write_with_expect_on_an_absent_key_is_false_and_creates_nothing(self, substrate: SQLiteSubstrate) -> None:
        assert substrate.write("k", {"v": 1}, expect=1) is False
        assert substrate.read("k") is None

    @pytest.mark.parametrize("expect", [0, -1])
    def test_expect_below_one_never_matches_as_in_the_seed(self, substrate: SQLiteSubstrate, expect: int) -> None:
        # The seed's UPDATE ... WHERE revision = 0 matches nothing: revisions start at 1.
        assert substrate.write("k", {"v": 1}, expect=expect) is False
        assert substrate.read("k") is None
        substrate.write("k", {"v": 1})
        assert substrate.write("k", {"v": 2}, expect=expect) is False
        assert substrate.read("k") == Stored({"v": 1}, 1)

    @pytest.mark.parametrize("payload", UNDECODABLE)
    def test_undecodable_payload_raises_substrate_unreadable(self, substrate: SQLiteSubstrate, payload: bytes) -> None:
        plant(substrate.store, "bad", payload)
        with pytest.raises(SubstrateUnreadableError) as caught:
            substrate.read("bad")
        assert caught.value.key == "bad"
        assert caught.value.reason

    @pytest.mark.parametrize("payload", NOT_AN_OBJECT)
    def test_non_object_payload_raises_with_the_type_name(self, substrate: SQLiteSubstrate, payload: bytes) -> None:
        plant(substrate.store, "bad", payload)
        with pytest.raises(SubstrateUnreadableError) as caught:
            substrate.read("bad")
        found = type(orjson.loads(payload)).__name__
        assert caught.value.reason == f"expected an object, found {found}"
        assert caught.value.key == "bad"

    def test_delete(self, substrate: SQLiteSubstrate) -> None:
        substrate.write("k", {"v": 1})
        assert substrate.delete("k") is True
        assert substrate.read("k") is None
        assert substrate.delete("k") is False

    def test_threads_share_one_substrate(self, substrate: SQLiteSubstrate) -> None:
        barrier = threading.Barrier(4)
        errors: list[BaseException] = []

        def work(i: int) -> None:
            try:
                barrier.wait(30)
                for j in range(10):
                    substrate.write(f"t{i}/{j}", {"i": i, "j": j})
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []
        size = 10 * len(orjson.dumps({"i": 1, "j": 0}))
        assert substrate.describe("t1/") == f"10 documents, {size} B in {substrate.path}"


# -- the lock ------------------------------------------------------------------------


def _rmw(s: SQLiteSubstrate, key: str) -> None:
    with s.lock(key):
        got = s.read(key)
        s.write(key, {"n": (got.data["n"] if got else 0) + 1})


class TestFunctualizeLock(_WithSubstrate):
    def test_lock_commits_at_the_end_and_is_reentrant(self, substrate: SQLiteSubstrate) -> None:
        with substrate.lock("a", "b"):
            substrate.write("a", {"v": 1})
            with substrate.lock("b"):
                substrate.write("b", {"v": 1})
                with substrate.lock("a", "c"):
                    substrate.write("c", {"v": 1})
        assert [substrate.read(k) for k in "abc"] == [Stored({"v": 1}, 1)] * 3

    def test_an_exception_rolls_back_the_lock(self, substrate: SQLiteSubstrate) -> None:
        substrate.write("a", {"v": 0})
        with pytest.raises(ValueError, match="boom"), substrate.lock("a"):
            substrate.write("a", {"v": 1})
            substrate.clear("a")
            raise ValueError("boom")
        assert substrate.read("a") == Stored({"v": 0}, 1)
        assert substrate.read("a.bak") is None

    def test_cas_inside_the_lock(self, substrate: SQLiteSubstrate) -> None:
        substrate.write("k", {"v": 1})
        with substrate.lock("k"):
            got = substrate.read("k")
            assert got is not None
            assert substrate.write("k", {"v": 2}, expect=got.revision) is True
            assert substrate.write("k", {"v": 3}, expect=got.revision) is False
        assert substrate.read("k") == Stored({"v": 2}, 2)

    def test_opposite_orders_in_threads_never_deadlock(self, substrate: SQLiteSubstrate) -> None:
        rounds = 20
        barrier = threading.Barrier(2)
        errors: list[BaseException] = []

        def work(first: str, second: str) -> None:
            try:
                barrier.wait(30)
                for _ in range(rounds):
                    with substrate.lock(first, second), substrate.lock(second):
                        _rmw(substrate, first)
                        _rmw(substrate, second)
            except BaseException as exc:
                errors.append(exc)

        threads = [
            threading.Thread(target=work, args=("a", "b"), daemon=True),
            threading.Thread(target=work, args=("b", "a"), daemon=True),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
            assert not t.is_alive(), "deadlock"
        assert errors == []
        assert substrate.read("a") == Stored({"n": 2 * rounds}, 2 * rounds)
        assert substrate.read("b") == Stored({"n": 2 * rounds}, 2 * rounds)

    def test_locked_increments_in_threads_are_exact(self, substrate: SQLiteSubstrate) -> None:
        def work() -> None:
            for _ in range(15):
                _rmw(substrate, "n")

        run_threads(work, 4)
        assert substrate.read("n") == Stored({"n": 60}, 60)


# -- clear --------------------------------------------------------------------------


class TestFunctualizeClear(_WithSubstrate):
    def test_clear_of_absent_key_is_none(self, substrate: SQLiteSubstrate) -> None:
        assert substrate.clear("missing") is None
        assert substrate.describe("missing.bak") == f"{substrate.path}#missing.bak (absent)"

    def test_clear_moves_to_key_bak_and_reports_path_hash_backup(self, substrate: SQLiteSubstrate) -> None:
        substrate.write("k", {"v": 1})
        substrate.write("k", {"v": 2})
        assert substrate.clear("k") == f"{substrate.path}#k.bak"
        assert substrate.read("k") is None
        assert substrate.read("k.bak") == Stored({"v": 2}, 1)

    def test_later_backups_are_numbered(self, substrate: SQLiteSubstrate) -> None:
        got = []
        for i in range(3):
            substrate.write("k", {"v": i})
            got.append(substrate.clear("k"))
        assert got == [f"{substrate.path}#k.bak", f"{substrate.path}#k.bak.1", f"{substrate.path}#k.bak.2"]

    @pytest.mark.parametrize("payload", UNDECODABLE + NOT_AN_OBJECT)
    def test_clear_works_on_what_read_refuses(self, substrate: SQLiteSubstrate, payload: bytes) -> None:
        plant(substrate.store, "bad", payload, revision=4)
        with pytest.raises(SubstrateUnreadableError):
            substrate.read("bad")
        assert substrate.clear("bad") == f"{substrate.path}#bad.bak"
        assert substrate.read("bad") is None
        raw = substrate.store.documents.read_raw("bad.bak")
        assert raw is not None and raw.payload == payload and raw.revision == 1
        # Free again: a fresh document can take the key.
        assert substrate.write("bad", {"v": 1}) is True
        assert substrate.read("bad") == Stored({"v": 1}, 1)


# -- describe ------------------------------------------------------------------------


class TestFunctualizeDescribe(_WithSubstrate):
    def test_describe_one_key(self, substrate: SQLiteSubstrate) -> None:
        substrate.write("k", {"v": "ü"})
        assert substrate.describe("k") == f"{substrate.path}#k ({stored_size(substrate, 'k')} B)"

    def test_describe_absent_key(self, substrate: SQLiteSubstrate) -> None:
        assert substrate.describe("k") == f"{substrate.path}#k (absent)"

    def test_describe_namespace_in_aggregate(self, substrate: SQLiteSubstrate) -> None:
        assert substrate.describe("scope-state/") == "empty"
        substrate.write("scope-state/run-1", {"v": 1})
        one = stored_size(substrate, "scope-state/run-1")
        assert substrate.describe("scope-state/") == f"1 document, {one} B in {substrate.path}"
        substrate.write("scope-state/run-2", {"v": [1, 2]})
        substrate.write("scope-state", {"not": "inside"})
        substrate.write("scope-state0/x", {"not": "inside"})
        two = one + stored_size(substrate, "scope-state/run-2")
        assert substrate.describe("scope-state/") == f"2 documents, {two} B in {substrate.path}"

    def test_namespace_is_a_prefix_not_a_like_pattern(self, substrate: SQLiteSubstrate) -> None:
        # The seed used LIKE, where "_" matched any character; a prefix is a prefix.
        substrate.write("ab/1", {"v": 1})
        assert substrate.describe("a_/") == "empty"
        substrate.write("a_/1", {"v": 1})
        assert substrate.describe("a_/").startswith("1 document,")


# -- bad input -----------------------------------------------------------------------


class TestFunctualizeBadInput(_WithSubstrate):
    def _state(self, s: SQLiteSubstrate) -> list[Any]:
        docs = s.store.documents
        return [(k, docs.read_raw(k)) for k in docs.iter_keys()]

    @pytest.mark.parametrize(
        "payload",
        [{"v": {1, 2}}, {"v": b"raw"}, {"v": object()}, {1: "int key"}, ["not", "a", "dict"], None],
        ids=["set", "bytes", "object", "int_key", "list", "none"],
    )
    def test_unserialisable_payload_is_a_type_error_and_changes_nothing(
        self, substrate: SQLiteSubstrate, payload: Any
    ) -> None:
        substrate.write("k", {"v": 1})
        before = self._state(substrate)
        for expect in (None, 1, 0):
            with pytest.raises(TypeError):
                substrate.write("k", payload, expect=expect)
        assert self._state(substrate) == before

    @pytest.mark.parametrize(
        "payload",
        [{"v": float("nan")}, {"v": [float("inf")]}, {"v": "\ud800"}, {"v": 2**70}],
        ids=["nan", "inf", "surrogate", "big_int"],
    )
    def test_unrepresentable_values_are_value_errors_and_change_nothing(
        self, substrate: SQLiteSubstrate, payload: Any
    ) -> None:
        substrate.write("k", {"v": 1})
        before = self._state(substrate)
        for expect in (None, 1, 0):
            with pytest.raises(ValueError):
                substrate.write("k", payload, expect=expect)
        assert self._state(substrate) == before

    def test_huge_document_is_refused_before_the_database(self, substrate: SQLiteSubstrate) -> None:
        limit = substrate.store.documents.max_value_size
        assert limit is not None
        before = self._state(substrate)
        with pytest.raises(ValueError, match="max_value_size"):
            substrate.write("k", {"v": "x" * limit})
        assert self._state(substrate) == before

    @pytest.mark.parametrize("key", ["k\ud800", "k\x00", "é" * 1025], ids=["surrogate", "nul", "too_long"])
    def test_bad_keys_are_value_errors_everywhere(self, substrate: SQLiteSubstrate, key: str) -> None:
        substrate.write("k", {"v": 1})
        before = self._state(substrate)
        for call in (
            lambda: substrate.read(key),
            lambda: substrate.write(key, {"v": 1}),
            lambda: substrate.write(key, {"v": 1}, expect=0),
            lambda: substrate.clear(key),
            lambda: substrate.delete(key),
            lambda: substrate.describe(key),
            lambda: substrate.describe(key + "/"),
        ):
            with pytest.raises(ValueError):
                call()
        with pytest.raises(ValueError), substrate.lock("k", key):
            pytest.fail("entered the lock")
        assert self._state(substrate) == before

    @pytest.mark.parametrize("expect", ["1", 1.0, b"1"])
    def test_non_integer_expect_is_a_type_error(self, substrate: SQLiteSubstrate, expect: Any) -> None:
        substrate.write("k", {"v": 1})
        with pytest.raises(TypeError):
            substrate.write("k", {"v": 2}, expect=expect)
        assert substrate.read("k") == Stored({"v": 1}, 1)

    def test_non_str_key_is_a_type_error(self, substrate: SQLiteSubstrate) -> None:
        with pytest.raises(TypeError):
            substrate.read(b"k")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            substrate.write(1, {"v": 1})  # type: ignore[arg-type]


# -- the plugin ----------------------------------------------------------------------


class _HookRegistry:
    def __init__(self) -> None:
        self.hooks: list[tuple[Any, Any]] = []

    def register_global(self, event: Any, handler: Any) -> None:
        self.hooks.append((event, handler))


class _Configuration:
    def __init__(self, db_path: str | None) -> None:
        self.db_path = db_path
        self.asked: list[str] = []

    def resolve_model(self, section: str, model: Any) -> Any:
        self.asked.append(section)
        return model(db_path=self.db_path)


class _AppBase:
    def __init__(self, root: Path, db_path: str | None = None, refuse: bool = False) -> None:
        self.hook_registry = _HookRegistry()
        self.configuration = _Configuration(db_path)
        self.fresh_root = str(root)
        self._refuse = refuse
        self._substrate: Any = None


class _App(_AppBase):
    """functualize 0.3's shape: ``app.substrate = ...`` installs."""

    @property
    def substrate(self) -> Any:
        return self._substrate

    @substrate.setter
    def substrate(self, value: Any) -> None:
        if self._refuse:
            raise RuntimeError("the substrate was already resolved")
        self._substrate = value


class _AppWithInstallDoor(_AppBase):
    """functualize 0.4's shape: ``substrate`` is read-only, ``install_substrate()`` installs (boot only)."""

    @property
    def substrate(self) -> Any:
        return self._substrate

    def install_substrate(self, substrate: Any) -> None:
        if self._refuse:
            raise RuntimeError("the substrate is already in use by this app's engine")
        self._substrate = substrate


class TestFunctualizePlugin(_WithSubstrate):
    @pytest.fixture
    def fake_functualize(self, monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
        """Stand-ins for the functualize (and pydantic) modules the plugin imports lazily."""
        app_ready = object()
        hooks = types.ModuleType("functualize._events.hooks")
        hooks.HookEvent = types.SimpleNamespace(APP_READY=app_ready)  # type: ignore[attr-defined]

        class TheirUnreadable(Exception):
            pass

        errors = types.ModuleType("functualize._types.errors")
        errors.SubstrateUnreadableError = TheirUnreadable  # type: ignore[attr-defined]
        for name in ("functualize", "functualize._events", "functualize._types"):
            monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
        monkeypatch.setitem(sys.modules, "functualize._events.hooks", hooks)
        monkeypatch.setitem(sys.modules, "functualize._types.errors", errors)

        pydantic = types.ModuleType("pydantic")

        def create_model(name: str, **fields: Any) -> Any:
            def build(**values: Any) -> Any:
                return types.SimpleNamespace(**{f: values.get(f) for f in fields})

            return build

        pydantic.create_model = create_model  # type: ignore[attr-defined]
        pydantic.Field = lambda **kw: kw.get("default")  # type: ignore[attr-defined]
        if "pydantic" not in sys.modules:
            monkeypatch.setitem(sys.modules, "pydantic", pydantic)
        monkeypatch.setattr(compat, "_bridged", None)
        return types.SimpleNamespace(app_ready=app_ready, unreadable=TheirUnreadable)

    def test_shape(self) -> None:
        plugin = SQLiteStatePlugin()
        assert plugin.name == "sqlite-state"
        assert plugin.substrate is None

    def test_registers_on_app_ready_and_installs_the_default_path(
        self, tmp_path: Path, fake_functualize: types.SimpleNamespace
    ) -> None:
        app = _App(tmp_path)
        plugin = SQLiteStatePlugin()
        plugin(app)
        assert [event for event, _ in app.hook_registry.hooks] == [fake_functualize.app_ready]
        assert app.substrate is None  # nothing before APP_READY
        _, handler = app.hook_registry.hooks[0]
        handler(app)
        assert isinstance(app.substrate, SQLiteSubstrate)
        assert plugin.substrate is app.substrate
        assert app.substrate.path == tmp_path / ".functualize" / "state.db"
        assert app.configuration.asked == ["plugin.sqlite-state"]
        app.substrate.write("k", {"v": 1})
        assert (tmp_path / ".functualize" / "state.db").exists()
        app.substrate.close()

    def test_configured_db_path_wins(self, tmp_path: Path, fake_functualize: types.SimpleNamespace) -> None:
        configured = tmp_path / "elsewhere" / "my.db"
        app = _App(tmp_path, db_path=str(configured))
        plugin = SQLiteStatePlugin()
        plugin(app)
        app.hook_registry.hooks[0][1](app)
        assert plugin.substrate is not None
        assert plugin.substrate.path == configured
        plugin.substrate.close()

    def test_configured_url_is_used_as_a_url(
        self, shared_url: str, fake_functualize: types.SimpleNamespace, open_shared: Callable[..., durastate.Store]
    ) -> None:
        app = _App(Path("/nonexistent-root"), db_path=shared_url)
        plugin = SQLiteStatePlugin()
        plugin(app)
        app.hook_registry.hooks[0][1](app)
        assert plugin.substrate is not None
        plugin.substrate.write("k", {"v": 1})
        with open_shared() as store:
            assert store.documents.read("k") is not None
        plugin.substrate.close()

    def test_a_failed_install_is_logged_and_left_alone(
        self, tmp_path: Path, fake_functualize: types.SimpleNamespace, caplog: pytest.LogCaptureFixture
    ) -> None:
        app = _App(tmp_path, refuse=True)
        plugin = SQLiteStatePlugin()
        plugin(app)
        with caplog.at_level(logging.ERROR, logger=compat.__name__):
            app.hook_registry.hooks[0][1](app)  # must not raise
        assert plugin.substrate is None
        assert app.substrate is None
        assert "could not install" in caplog.text

    def test_functualize_04_installs_through_install_substrate(
        self, tmp_path: Path, fake_functualize: types.SimpleNamespace
    ) -> None:
        app = _AppWithInstallDoor(tmp_path)
        plugin = SQLiteStatePlugin()
        plugin(app)
        app.hook_registry.hooks[0][1](app)
        assert isinstance(app.substrate, SQLiteSubstrate)
        assert plugin.substrate is app.substrate
        app.substrate.close()

    def test_a_refused_install_raises_functualizes_install_error_where_it_has_one(
        self, tmp_path: Path, fake_functualize: types.SimpleNamespace
    ) -> None:
        """functualize 0.4 aborts the boot on SubstrateInstallError instead of splitting a project's documents."""

        class TheirInstallError(Exception):
            pass

        sys.modules["functualize._types.errors"].SubstrateInstallError = TheirInstallError  # type: ignore[attr-defined]
        app = _AppWithInstallDoor(tmp_path, refuse=True)
        plugin = SQLiteStatePlugin()
        plugin(app)
        with pytest.raises(TheirInstallError, match="already in use"):
            app.hook_registry.hooks[0][1](app)
        assert plugin.substrate is None
        assert app.substrate is None

    def test_unreadable_error_built_with_functualizes_key_detail_signature(
        self, substrate: SQLiteSubstrate, fake_functualize: types.SimpleNamespace
    ) -> None:
        """functualize 0.3 and 0.4 define ``SubstrateUnreadableError(key, detail)``."""

        class KeyDetailUnreadable(Exception):
            def __init__(self, key: str, detail: str) -> None:
                self.key = key
                super().__init__(f"Cannot read {key!r}: {detail}")

        sys.modules["functualize._types.errors"].SubstrateUnreadableError = KeyDetailUnreadable  # type: ignore[attr-defined]
        plant(substrate.store, "bad", b"{not json")
        with pytest.raises(KeyDetailUnreadable) as caught:
            substrate.read("bad")
        assert isinstance(caught.value, SubstrateUnreadableError)
        assert caught.value.key == "bad"
        assert caught.value.reason
        assert str(caught.value).startswith("Cannot read 'bad': ")

    def test_unreadable_error_is_also_functualizes_own(
        self, substrate: SQLiteSubstrate, fake_functualize: types.SimpleNamespace
    ) -> None:
        plant(substrate.store, "bad", b"[1]")
        with pytest.raises(fake_functualize.unreadable) as caught:
            substrate.read("bad")
        assert isinstance(caught.value, SubstrateUnreadableError)
        assert caught.value.key == "bad"


# -- model --------------------------------------------------------------------------


class SubstrateMachine(RuleBasedStateMachine):
    """The substrate against a dict ``key -> (data, revision)`` with the seed's rules."""

    def __init__(self, s: SQLiteSubstrate) -> None:
        super().__init__()
        self.s = s
        self.model: dict[str, tuple[dict[str, Any], int]] = {}
        docs = s.store.documents
        for key in list(docs.iter_keys()):
            docs.delete(key)

    @rule(key=MODEL_KEYS, data=DOCS)
    def write(self, key: str, data: dict[str, Any]) -> None:
        assert self.s.write(key, data) is True
        self.model[key] = (orjson.loads(orjson.dumps(data)), self.model.get(key, ({}, 0))[1] + 1)

    @rule(key=MODEL_KEYS, data=DOCS, offset=st.sampled_from([0, 1, -1]), absolute=st.sampled_from([None, 0]))
    def write_expect(self, key: str, data: dict[str, Any], offset: int, absolute: int | None) -> None:
        current = self.model.get(key, ({}, 0))[1]
        expect = absolute if absolute is not None else current + offset
        ok = key in self.model and expect == current
        assert self.s.write(key, data, expect=expect) is ok
        if ok:
            self.model[key] = (orjson.loads(orjson.dumps(data)), current + 1)

    @rule(key=MODEL_KEYS)
    def delete(self, key: str) -> None:
        assert self.s.delete(key) is (key in self.model)
        self.model.pop(key, None)

    @rule(key=MODEL_KEYS)
    def clear(self, key: str) -> None:
        got = self.s.clear(key)
        if key not in self.model:
            assert got is None
            return
        backup, n = key + ".bak", 1
        while backup in self.model:
            backup, n = f"{key}.bak.{n}", n + 1
        assert got == f"{self.s.path}#{backup}"
        self.model[backup] = (self.model.pop(key)[0], 1)

    @rule(key=MODEL_KEYS)
    def describe(self, key: str) -> None:
        got = self.s.describe(key)
        if key.endswith("/"):
            inside = [k for k in self.model if k.startswith(key)]
            if not inside:
                assert got == "empty"
            else:
                total = sum(len(orjson.dumps(self.model[k][0])) for k in inside)
                plural = "" if len(inside) == 1 else "s"
                assert got == f"{len(inside)} document{plural}, {total} B in {self.s.path}"
        elif key in self.model:
            assert got == f"{self.s.path}#{key} ({len(orjson.dumps(self.model[key][0]))} B)"
        else:
            assert got == f"{self.s.path}#{key} (absent)"

    @invariant()
    def every_key_reads_as_the_model(self) -> None:
        for key in ("a", "a/", "a/b", "b", "a.bak", "a.bak.1", "é", ""):
            got = self.s.read(key)
            if key in self.model:
                data, rev = self.model[key]
                assert got == Stored(data, rev)
            else:
                assert got is None


class TestFunctualizeModel(_WithSubstrate):
    def test_substrate_behaves_like_the_model(self, substrate: SQLiteSubstrate) -> None:
        factory: Any = lambda: SubstrateMachine(substrate)  # noqa: E731
        run_state_machine_as_test(
            factory,
            settings=settings(max_examples=20, stateful_step_count=20, deadline=None),
        )


# -- several processes -----------------------------------------------------------------


def mp_substrate_locked(url: str, rounds: int, barrier: Any) -> None:
    with SQLiteSubstrate(url) as s:  # the store's default busy_timeout (30 s) rides out contention
        barrier.wait(30)
        for _ in range(rounds):
            with s.lock("counter", "other"):
                got = s.read("counter")
                s.write("counter", {"n": (got.data["n"] if got else 0) + 1})


def mp_substrate_cas(url: str, rounds: int, barrier: Any) -> int:
    conflicts = 0
    with SQLiteSubstrate(url) as s:
        barrier.wait(30)
        for _ in range(rounds):
            while True:
                got = s.read("counter")
                assert got is not None
                if s.write("counter", {"n": got.data["n"] + 1}, expect=got.revision):
                    break
                conflicts += 1
    return conflicts


@pytest.mark.multiprocess
class TestFunctualizeAcrossProcesses:
    PROCESSES = 3
    ROUNDS = 30

    def test_locked_read_modify_write_from_three_processes_is_exact(self, shared_url: str) -> None:
        SQLiteSubstrate(shared_url).close()
        with _Workers(ANY_METHOD) as workers:
            barrier = workers.ctx.Barrier(self.PROCESSES)
            for i in range(self.PROCESSES):
                workers.start(f"locker-{i}", mp_substrate_locked, shared_url, self.ROUNDS, barrier)
            workers.results()
        total = self.PROCESSES * self.ROUNDS
        with SQLiteSubstrate(shared_url) as s:
            assert s.read("counter") == Stored({"n": total}, total)

    def test_cas_retry_loops_from_three_processes_are_exact(self, shared_url: str) -> None:
        with SQLiteSubstrate(shared_url) as s:
            s.write("counter", {"n": 0})
        with _Workers(ANY_METHOD) as workers:
            barrier = workers.ctx.Barrier(self.PROCESSES)
            for i in range(self.PROCESSES):
                workers.start(f"cas-{i}", mp_substrate_cas, shared_url, self.ROUNDS, barrier)
            workers.results()
        total = self.PROCESSES * self.ROUNDS
        with SQLiteSubstrate(shared_url) as s:
            assert s.read("counter") == Stored({"n": total}, total + 1)
