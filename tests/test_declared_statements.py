"""Every statement is declared with its kind: ``engine.sql()`` never gets a ``str``.

``engine.sql`` refuses anything but a ``Statement`` or ``KeyLookup`` at run
time (``WrongType``, checked on every engine by the conformance suite's
``TestDeclaredStatements``). This scan finds the calls that would pass one
without running them: a string literal, an f-string, a concatenation, a
``.format``/``.replace`` of a string, or a module constant bound to one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("src", "tests", "bench")


def _stringish(node: ast.AST, strings: set[str]) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        return _stringish(node.left, strings) or _stringish(node.right, strings)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr in ("format", "replace", "join", "strip") and _stringish(node.func.value, strings)
    if isinstance(node, ast.Name):
        return node.id in strings
    return False


def undeclared_calls(source: str) -> list[int]:
    """Line numbers of ``<x>.sql(<a str>)`` calls in ``source``."""
    tree = ast.parse(source)
    strings: set[str] = set()
    for statement in tree.body:  # module constants bound to a str
        if isinstance(statement, ast.Assign) and _stringish(statement.value, strings):
            strings.update(t.id for t in statement.targets if isinstance(t, ast.Name))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "sql"
        and len(node.args) == 1
        and _stringish(node.args[0], strings)
    ]


def test_the_scan_finds_undeclared_statements() -> None:
    source = (
        'TEXT = "SELECT 1"\n'
        "engine.sql(TEXT)\n"
        'engine.sql("SELECT 2")\n'
        'engine.sql(f"SELECT {n}")\n'
        'engine.sql("SELECT " + column)\n'
        'engine.sql(READ("SELECT 3"))\n'
        "engine.sql(KeyLookup(table='t', columns='a', fixed=(), key='k', count=1))\n"
    )
    assert undeclared_calls(source) == [2, 3, 4, 5]


@pytest.mark.parametrize("folder", SCANNED)
def test_no_module_passes_a_str_to_engine_sql(folder: str) -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path.name != Path(__file__).name
        for line in undeclared_calls(path.read_text())
    ]
    assert found == [], "engine.sql() given a str (declare it: READ(...), WRITE(...), ...): " + ", ".join(found)
