"""``durastate presence``: presence namespaces and their live fields (read with peek: no sweep)."""

from __future__ import annotations

import click

from .._common import at, data_command, emit_page, store_from, take_page
from ._shared import LIMIT, after_option


@click.command()
@click.argument("ns", required=False)
@after_option("Namespaces after this one: the cursor the previous page printed.")
@LIMIT
@data_command
def presence(ns: str | None, after: str | None, limit: int, url: str | None, prefix: str, as_json: bool) -> None:
    """List presence namespaces, or the live fields of NS (all of them: one namespace is read at once)."""
    with store_from(url, prefix, read_only=True) as store:
        if ns is None:
            names, more = take_page(lambda a, n: store.presence.namespaces(after=a, limit=n), after, limit, lambda n: n)
            emit_page([{"namespace": n} for n in names], more, as_json, ["namespace"])
            return
        entries = store.presence.peek(ns)  # read() would sweep expired fields: a write
    rows = [
        {
            "participant": p.participant,
            "field": p.field,
            "value": p.value,
            "seen": p.seen,
            "at": at(p.at),
            "expires": at(p.expires_at),
        }
        for p in entries
    ]
    emit_page(rows, None, as_json, ["participant", "field", "value", "seen", "at", "expires"])
