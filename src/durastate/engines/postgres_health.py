"""What a PostgreSQL failover can lose, as the server sees it: the facts ``durastate doctor`` reports.

A client cannot make up for a commit the server acknowledged and then
lost: that is decided by the server's replication. ``failover_facts``
reads, through the store's own engine:

* whether this server is a standby (``pg_is_in_recovery()``): it refuses
  writes; a writable store should reach the primary (a multi-host URL
  with ``target_session_attrs=read-write``);
* ``synchronous_standby_names`` and ``synchronous_commit``: a commit waits
  for a standby only when both say so (``synchronous_commit`` ``on``,
  ``remote_write`` or ``remote_apply`` and a non-empty
  ``synchronous_standby_names``);
* the standbys streaming from it (``pg_stat_replication``: their
  ``sync_state`` is ``sync`` or ``quorum`` when a commit waits for them;
  a role without ``pg_monitor`` sees no states, reported as unknown);
* whether a connection pooler is in front (``PostgresEngine.pooler``).

and the warnings that follow: asynchronous standbys (a failover loses the
commits they had not received), ``synchronous_commit`` ``off``/``local``,
synchronous names with no synchronous standby connected (commits wait).
"""

from __future__ import annotations

from typing import Any

from .base import READ, Engine

__all__ = ["failover_facts"]

SETTINGS = READ(
    "SELECT pg_is_in_recovery(), current_setting('synchronous_standby_names'), current_setting('synchronous_commit')"
)
STANDBYS = READ(
    "SELECT application_name, state, sync_state FROM pg_stat_replication ORDER BY application_name NULLS LAST"
)
_WAITING_COMMITS = ("on", "remote_write", "remote_apply")
_SYNCHRONOUS = ("sync", "quorum")


def failover_facts(engine: Engine) -> tuple[dict[str, Any], list[str]]:
    """``(facts, warnings)`` about what a failover of ``engine``'s server can lose (see the module docstring)."""
    row = engine.one(engine.sql(SETTINGS))
    assert row is not None
    in_recovery, standby_names, synchronous_commit = bool(row[0]), str(row[1]), str(row[2])
    standbys = [
        {"name": name, "state": state, "sync_state": sync_state}
        for name, state, sync_state in engine.all(engine.sql(STANDBYS))
    ]
    synchronous = [s for s in standbys if s["sync_state"] in _SYNCHRONOUS and s["state"] == "streaming"]
    unknown = [s for s in standbys if s["sync_state"] is None]
    facts: dict[str, Any] = {
        "in_recovery": in_recovery,
        "synchronous_standby_names": standby_names or "(empty: replication is asynchronous)",
        "synchronous_commit": synchronous_commit,
        "standbys": ", ".join(f"{s['name']} ({s['sync_state'] or 'state unknown'})" for s in standbys) or "none",
        "synchronous_standbys": len(synchronous),
        "pooler": bool(getattr(engine, "pooler", False)),
    }
    warnings: list[str] = []
    if in_recovery:
        warnings.append(
            "this server is a standby (in recovery): it refuses writes; point a writable store at the primary, "
            "e.g. a multi-host URL with target_session_attrs=read-write"
        )
    waits = synchronous_commit in _WAITING_COMMITS and bool(standby_names)
    if standbys and not unknown and not synchronous:
        warnings.append(
            "acknowledged commits can be lost at failover: the standbys replicate asynchronously, so a standby "
            "promoted after the primary fails lacks the commits it had not yet received; set "
            "synchronous_standby_names (pg_auto_failover and Patroni's synchronous_mode manage it)"
        )
    elif standbys and synchronous_commit not in _WAITING_COMMITS:
        warnings.append(
            f"acknowledged commits can be lost at failover: synchronous_commit = {synchronous_commit} acknowledges "
            "a commit before any standby has it; use on (the default), remote_write or remote_apply"
        )
    if standby_names and synchronous_commit in _WAITING_COMMITS and not synchronous and not unknown and not in_recovery:
        warnings.append(
            f"synchronous_standby_names is '{standby_names}' but no synchronous standby is streaming: "
            "every commit waits until one connects"
        )
    if unknown:
        facts["synchronous_standbys"] = "unknown (the role needs pg_monitor to see pg_stat_replication)"
    if facts["pooler"]:
        facts["pooler"] = "yes: no prepared statements, no LISTEN (waiters poll), no session settings"
    facts["commits_wait_for_a_standby"] = waits and bool(synchronous)
    return facts, warnings
