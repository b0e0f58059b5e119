"""``durastate doctor`` on PostgreSQL: the facts that decide what a failover can lose, and the warnings.

The decisions are checked on canned server answers (a stub engine: an
asynchronous standby, ``synchronous_commit = local``, synchronous names
with nobody streaming, a standby, a role without ``pg_monitor``); the
real server (no standbys) and the CLI on it; the real HA cluster's answers
are checked by ``tests/failover``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

import durastate
from durastate.cli.app import cli
from durastate.engines.postgres_health import SETTINGS, STANDBYS, failover_facts


class _Server:
    """An engine stand-in answering the two statements ``failover_facts`` runs."""

    def __init__(self, settings: tuple[bool, str, str], standbys: list[tuple[str, str, str | None]]) -> None:
        self.answers = {str(SETTINGS): settings, str(STANDBYS): standbys}

    def sql(self, statement: Any) -> str:
        return str(statement)

    def one(self, sql: str, params: Any = ()) -> Any:
        return self.answers[sql]

    def all(self, sql: str, params: Any = ()) -> Any:
        return self.answers[sql]


QUORUM = "ANY 1 (node_2)"


@pytest.mark.parametrize(
    ("settings", "standbys", "warned", "waits"),
    [
        ((False, "", "on"), [], [], False),  # a lone server: nothing to fail over to
        ((False, QUORUM, "on"), [("node_2", "streaming", "quorum")], [], True),
        ((False, "FIRST 1 (a)", "remote_apply"), [("a", "streaming", "sync")], [], True),
        ((False, "", "on"), [("node_2", "streaming", "async")], ["can be lost", "asynchronously"], False),
        ((False, QUORUM, "local"), [("node_2", "streaming", "quorum")], ["can be lost", "synchronous_commit"], False),
        ((False, QUORUM, "on"), [], ["no synchronous standby is streaming"], False),
        ((False, QUORUM, "on"), [("node_2", "catchup", "quorum")], ["no synchronous standby is streaming"], False),
        ((True, "", "on"), [], ["standby (in recovery)"], False),
        ((False, QUORUM, "on"), [("node_2", "streaming", None)], [], False),  # no pg_monitor: unknown, no claim
    ],
)
def test_what_a_failover_can_lose(
    settings: tuple[bool, str, str], standbys: list[tuple[str, str, str | None]], warned: list[str], waits: bool
) -> None:
    facts, warnings = failover_facts(_Server(settings, standbys))  # type: ignore[arg-type]
    assert facts["in_recovery"] is settings[0]
    assert facts["synchronous_commit"] == settings[2]
    assert facts["commits_wait_for_a_standby"] is waits
    text = " ".join(warnings)
    for fragment in warned:
        assert fragment in text
    if not warned:
        assert warnings == []
    if standbys and standbys[0][2] is None:
        assert "pg_monitor" in str(facts["synchronous_standbys"])


def test_doctor_reports_replication_on_the_real_server(pg_url: str) -> None:
    durastate.open(pg_url).close()  # doctor opens stores read-only: create it first
    done = CliRunner().invoke(cli, ["doctor", "--url", pg_url, "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert report["in_recovery"] is False
    assert report["pooler"] is False
    assert "synchronous_standby_names" in report and "standbys" in report
    text = CliRunner().invoke(cli, ["doctor", "--url", pg_url]).output
    assert "synchronous_commit" in text
