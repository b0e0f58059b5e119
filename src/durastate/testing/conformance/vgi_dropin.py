"""Conformance: ``durastate.compat.vgi`` as a drop-in under vgi-python's own framework.

Found by driving vgi-python 0.47.0 over ``compat.vgi``: execution ids of any
length (vgi mints them; the seed has no cap), vgi's ``FrameworkNS`` members
accepted by this module's ``BoundStorage`` and this module's accepted by
vgi's, and ``state_drain`` in key order.

vgi-python 0.47.0 requires Python >= 3.13, so it cannot be installed where
durastate's own suite runs on 3.11; the enum tests install a stand-in
``vgi.function_storage`` package (same enum members, and a namespace check
that accepts only its own enum's members, as vgi's does) in a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from durastate.compat import vgi as compat_vgi
from durastate.compat.vgi import BoundStorage, FunctionStorage

from .vgi import SEED_FRAMEWORK_NS

__all__ = ["TestVgiDrainOrder", "TestVgiFrameworkNSOfVgi", "TestVgiLongExecutionIds", "TestVgiValidatesOnce"]

# The longest execution id whose queue keeps the plain ``b"vgi/" + id`` name.
PLAIN_ID_LIMIT = 1020


class _WithStorage:
    @pytest.fixture
    def storage(self, store_url: str) -> Iterator[FunctionStorage]:
        with FunctionStorage(store_url) as opened:
            yield opened


class TestVgiLongExecutionIds(_WithStorage):
    @pytest.mark.parametrize("size", [PLAIN_ID_LIMIT, PLAIN_ID_LIMIT + 1, PLAIN_ID_LIMIT + 5, 4096, 100_000])
    def test_a_queue_works_for_an_execution_id_of_any_length(self, storage: FunctionStorage, size: int) -> None:
        execution_id = bytes(i % 251 for i in range(size))
        assert storage.queue_push(execution_id, [b"1", b"2", b"3"]) == 3
        assert storage.queue_pop(execution_id) == b"1"
        assert storage.queue_clear(execution_id) == 2
        assert storage.queue_pop(execution_id) is None

    def test_long_ids_that_share_a_prefix_keep_separate_queues(self, storage: FunctionStorage) -> None:
        common = b"x" * 2000
        first, second = common + b"-a", common + b"-b"
        storage.queue_push(first, [b"a1", b"a2"])
        storage.queue_push(second, [b"b1"])
        storage.queue_push(common, [b"c1"])
        assert storage.queue_pop(second) == b"b1"
        assert storage.queue_pop(second) is None
        assert storage.queue_pop(common) == b"c1"
        assert storage.queue_pop(first) == b"a1"
        assert storage.queue_clear(first) == 1

    def test_the_longest_plain_id_and_the_shortest_hashed_one_are_separate(self, storage: FunctionStorage) -> None:
        plain, hashed = b"q" * PLAIN_ID_LIMIT, b"q" * (PLAIN_ID_LIMIT + 1)
        storage.queue_push(plain, [b"plain"])
        storage.queue_push(hashed, [b"hashed"])
        assert storage.queue_pop(hashed) == b"hashed"
        assert storage.queue_pop(hashed) is None
        assert storage.queue_pop(plain) == b"plain"

    def test_bound_storage_with_a_long_execution_id(self, storage: FunctionStorage) -> None:
        # (State addresses keep the engine's own limit: see the module docstring of compat.vgi.)
        bound = BoundStorage(storage, b"e" * 5000)
        bound.queue_push([b"w1", b"w2"])
        assert bound.queue_pop() == b"w1"
        assert bound.queue_clear() == 1

    def test_a_long_id_that_is_not_bytes_is_still_a_type_error(self, storage: FunctionStorage) -> None:
        with pytest.raises(TypeError, match="execution_id"):
            storage.queue_push("e" * 5000, [b"w"])  # type: ignore[arg-type]


class TestVgiDrainOrder(_WithStorage):
    def test_drain_is_in_key_order_not_insertion_order(self, storage: FunctionStorage) -> None:
        """vgi's protocol documents key order; the seed's SQLite gave insertion (rowid) order."""
        inserted = [b"m", b"\xff", b"a", b"\x00", b"zz", b"b"]
        for key in inserted:
            storage.state_put_many(b"s", b"n", [(key, b"v-" + key)])
        storage.state_put_many(b"s", b"n", [(b"m", b"rewritten")])
        assert storage.state_drain(b"s", b"n") == [
            (b"\x00", b"v-\x00"),
            (b"a", b"v-a"),
            (b"b", b"v-b"),
            (b"m", b"rewritten"),
            (b"zz", b"v-zz"),
            (b"\xff", b"v-\xff"),
        ]


class TestVgiValidatesOnce(_WithStorage):
    """A correct call is checked by the facet alone; the adapter's checks run only to word a refusal."""

    ADAPTER_CHECKS = ("_as_bytes", "_as_bytes_list", "_as_pairs", "_as_int", "_as_int64", "_as_limit")

    def test_correct_calls_never_run_the_adapters_own_checks(
        self, storage: FunctionStorage, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        def refuse(name: str, value: object) -> None:
            raise AssertionError(f"the adapter re-checked {name} of a correct call")

        # Patched wherever a module of the adapter binds the name (the
        # package re-exports them; its modules call their own imports).
        package = compat_vgi.__name__
        modules = [m for name, m in sys.modules.items() if name == package or name.startswith(package + ".")]
        patched = 0
        for module in modules:
            for check in self.ADAPTER_CHECKS:
                if hasattr(module, check):
                    monkeypatch.setattr(module, check, refuse)
                    patched += 1
        assert compat_vgi.storage in modules and patched > len(self.ADAPTER_CHECKS)
        bound = BoundStorage(storage, b"exec")
        bound.state_put(b"ns", b"k", b"v")
        bound.state_put_many(b"ns", [(b"a", b"1"), (b"b", b"2")])
        assert bound.state_get(b"ns", b"k") == b"v"
        assert bound.state_get_many(b"ns", [b"a", b"b", b"zz"]) == [b"1", b"2", None]
        assert bound.state_scan(b"ns", start=b"a", limit=2) == [(b"a", b"1"), (b"b", b"2")]
        assert bound.state_append(b"log", b"k", b"e1") < bound.state_append(b"log", b"k", b"e2")
        assert [v for _, v in bound.state_log_scan(b"log", b"k", limit=5)] == [b"e1", b"e2"]
        assert bound.counter_add(b"c", b"n", 5) == 5
        bound.counter_set(b"c", b"n", 7)
        assert bound.counter_get(b"c", b"n") == 7
        bound.counter_delete(b"c", b"n")
        assert bound.queue_push([b"w1", b"w2"]) == 2
        assert bound.queue_pop() == b"w1"
        assert bound.state_delete(b"ns", [b"a"]) == 1
        assert bound.state_drain(b"ns") == [(b"b", b"2"), (b"k", b"v")]
        assert bound.execution_clear() >= 2

    def test_a_refused_call_still_gets_the_seeds_error_type(self, storage: FunctionStorage) -> None:
        with pytest.raises(TypeError, match=r"items\[0\] key must be bytes"):
            storage.state_put_many(b"s", b"n", [("k", b"v")])  # type: ignore[list-item]
        with pytest.raises(OverflowError, match="delta"):
            storage.state_counter_add(b"s", b"n", b"k", 2**63)
        assert storage.state_counter_add(b"s", b"n", b"k", 2**62) == 2**62
        with pytest.raises(ValueError, match="overflow"):  # a value refusal: the facet's own error stands
            storage.state_counter_add(b"s", b"n", b"k", 2**62)
        assert storage.state_counter_get(b"s", b"n", b"k") == 2**62


# A stand-in for vgi-python's ``vgi/function_storage.py``: its FrameworkNS
# members, and its rule that only its own enum's members may carry the
# reserved prefix.
_STAND_IN_VGI = (
    "import enum\n\n\nclass FrameworkNS(bytes, enum.Enum):\n"
    + "".join(f"    {name} = {value!r}\n" for name, value in SEED_FRAMEWORK_NS.items())
    + """

def vgi_accepts(ns):
    \"\"\"vgi's BoundStorage rule: a reserved-prefix namespace only as a member of this enum.\"\"\"
    if isinstance(ns, FrameworkNS):
        return True
    return not bytes(ns).startswith(b"_vgi/")
"""
)


def _run_with_stand_in_vgi(tmp_path: Path, script: str, *, vgi_source: str = _STAND_IN_VGI) -> str:
    package = tmp_path / "site" / "vgi"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "function_storage.py").write_text(vgi_source)
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "site")},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


class TestVgiFrameworkNSOfVgi:
    def test_with_vgi_installed_framework_ns_is_vgis_own_enum(self, tmp_path: Path) -> None:
        out = _run_with_stand_in_vgi(
            tmp_path,
            """
            import vgi.function_storage as vgi_fs
            from durastate.compat import vgi as compat
            assert compat.FrameworkNS is vgi_fs.FrameworkNS
            # vgi's own check accepts every member this module hands out
            assert all(vgi_fs.vgi_accepts(member) for member in compat.FrameworkNS)
            print("ok")
            """,
        )
        assert out.strip() == "ok"

    def test_with_vgi_installed_bound_storage_accepts_both_enums(self, tmp_path: Path) -> None:
        out = _run_with_stand_in_vgi(
            tmp_path,
            """
            import vgi.function_storage as vgi_fs
            from durastate.compat import vgi as compat
            with compat.FunctionStorage(":memory:") as storage:
                bound = compat.BoundStorage(storage, b"exec")
                bound.state_put(vgi_fs.FrameworkNS.TIO_STATE, b"k", b"from-vgi")
                # the stand-in's member names the same namespace
                assert bound.state_get(compat._STAND_IN_FRAMEWORK_NS.TIO_STATE, b"k") == b"from-vgi"
                assert storage.state_get_many(b"exec", b"_vgi/tio_state", [b"k"]) == [b"from-vgi"]
                assert bound.counter_add(vgi_fs.FrameworkNS.AGGREGATE_STATE, b"c", 2) == 2
                assert bound.state_drain(vgi_fs.FrameworkNS.TIO_STATE) == [(b"k", b"from-vgi")]
                try:
                    bound.state_put(b"_vgi/tio_state", b"k", b"v")
                except ValueError:
                    print("plain reserved bytes refused")
            """,
        )
        assert out.strip() == "plain reserved bytes refused"

    def test_a_vgi_that_cannot_be_imported_leaves_the_stand_in(self, tmp_path: Path) -> None:
        out = _run_with_stand_in_vgi(
            tmp_path,
            """
            from durastate.compat import vgi as compat
            assert compat.FrameworkNS is compat._STAND_IN_FRAMEWORK_NS
            with compat.FunctionStorage(":memory:") as storage:
                compat.BoundStorage(storage, b"e").state_put(compat.FrameworkNS.TIO_STATE, b"k", b"v")
            print("ok")
            """,
            vgi_source="raise ImportError('pyarrow is missing')\n",
        )
        assert out.strip() == "ok"

    def test_without_vgi_framework_ns_is_the_stand_in(self) -> None:
        from durastate.compat import vgi as compat

        try:
            import vgi.function_storage  # type: ignore[import-not-found]  # noqa: F401
        except ImportError:
            assert compat.FrameworkNS is compat._STAND_IN_FRAMEWORK_NS
        else:  # vgi-python is installed here: then it is vgi's
            assert compat.FrameworkNS is not compat._STAND_IN_FRAMEWORK_NS
