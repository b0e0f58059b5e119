"""Every command has help text, is documented in docs/cli.md, and takes the shared options.

Walks the click command tree, so a command added later without help, docs,
``--url`` (with ``DURASTATE_URL``) or ``--json`` fails here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from durastate.cli import cli
from durastate.cli._common import EXIT_CODES

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
# Commands that print no data of their own: a web server and the demo's own report.
NO_JSON = {"ui", "demo"}
# They take a shard map (several stores), not one store's URL.
MAP_COMMANDS = {"shards init", "shards show", "shards move"}


def leaves(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, click.Command]]:
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from leaves(command, (*path, name))
        else:
            yield " ".join((*path, name)), command


COMMANDS = list(leaves(cli))


def test_the_tree_has_the_commands_the_issue_lists() -> None:
    names = {name for name, _ in COMMANDS}
    wanted = {
        "info", "doctor", "stats", "backup", "export", "import", "maintain", "bench", "demo", "ui",
        "kv ls", "kv get", "kv scan", "queue ls", "queue stats", "queue peek", "queue dead", "queue redrive",
        "events sessions", "events read", "events claims", "docs ls", "docs show", "docs history",
        "records conversations", "records entries", "records document", "presence",
        "kv log", "kv counter", "events dead", "events redrive", "records documents",
    }  # fmt: skip
    assert wanted <= names


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_command_has_help_and_docs(name: str, command: click.Command) -> None:
    assert command.help and len(command.help.strip()) > 20, f"durastate {name} has no help text"
    assert f"### `durastate {name}" in DOCS.read_text(), f"durastate {name} is not documented in docs/cli.md"
    for param in command.params:
        if isinstance(param, click.Option) and param.name != "help":
            assert param.help, f"durastate {name} {param.opts[0]} has no help text"


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_command_takes_url_from_the_environment(name: str, command: click.Command) -> None:
    if name in MAP_COMMANDS:
        assert not any(p.name == "url" for p in command.params)
        return
    [url] = [p for p in command.params if p.name == "url"]
    if name == "bench":  # the application's store is never benchmarked by accident (docs/cli.md, bench)
        assert isinstance(url, click.Option) and url.envvar is None
        assert "DURASTATE_URL" in (url.help or "")
        return
    assert isinstance(url, click.Option) and url.envvar == "DURASTATE_URL" and url.show_envvar
    help_text = CliRunner().invoke(cli, [*name.split(), "--help"], terminal_width=200).output
    assert "DURASTATE_URL" in help_text


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_data_commands_take_json(name: str, command: click.Command) -> None:
    has_json = any(p.name == "as_json" for p in command.params)
    assert has_json == (name not in NO_JSON), name


def test_ui_binds_loopback_by_default() -> None:
    [host] = [p for p in cli.commands["ui"].params if p.name == "host"]
    assert host.default == "127.0.0.1"


def test_top_level_help_documents_the_exit_codes() -> None:
    text = " ".join(CliRunner().invoke(cli, ["--help"], terminal_width=200).output.split())
    for code, meaning in EXIT_CODES:
        assert f"{code} {meaning}" in text
    docs = " ".join(DOCS.read_text().split())
    for code, _ in EXIT_CODES:
        assert f"| `{code}` |" in docs, f"exit code {code} is not in docs/cli.md's table"
    assert "docs/cli.md" in text and "documentation site" in text
