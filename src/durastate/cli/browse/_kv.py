"""``durastate kv``: scopes, namespaces, values, logs and counters of the key/value facet."""

from __future__ import annotations

import click

from .. import kvlisting
from .._common import (
    FORMAT_OPTION,
    Name,
    NotFound,
    at,
    data_command,
    emit_page,
    parse_bytes,
    print_json,
    render_value,
    store_from,
    take_page,
)
from .._format import escape, show_value
from ._shared import LIMIT, after_option, bytes_successor, int64_argument


@click.group()
def kv() -> None:
    """Browse key/value data: scopes, namespaces, values, logs, counters."""


@kv.command("ls")
@click.argument("scope", required=False)
@after_option("Names after this one: the cursor the previous page printed.")
@LIMIT
@data_command
def kv_ls(scope: str | None, after: str | None, limit: int, url: str | None, prefix: str, as_json: bool) -> None:
    """List scopes, or the namespaces of SCOPE with what each holds: live values, log entries, counters.

    Counts are exact up to 100000 (then shown as 100000+).
    """
    bound = None if after is None else parse_bytes(after)
    with store_from(url, prefix, read_only=True) as store:
        if scope is None:
            names, more = take_page(lambda a, n: store.kv.scopes(after=a, limit=n), bound, limit, lambda n: n)
            emit_page([{"scope": Name(n)} for n in names], more, as_json, ["scope"])
            return
        s = parse_bytes(scope)
        spaces, more = take_page(lambda a, n: store.kv.namespaces(s, after=a, limit=n), bound, limit, lambda n: n)
        rows = []
        for ns in spaces:
            held = kvlisting.holdings(store.engine, s, ns)
            rows.append(
                {
                    "namespace": Name(ns),
                    "values": held.shown(held.values),
                    "log_entries": held.shown(held.log_entries),
                    "counters": held.shown(held.counters),
                }
            )
    emit_page(rows, more, as_json, ["namespace", "values", "log_entries", "counters"])


def _address(scope: str, ns: str, key: str) -> tuple[bytes, bytes, bytes]:
    return parse_bytes(scope), parse_bytes(ns), parse_bytes(key)


@kv.command("get")
@click.argument("scope")
@click.argument("ns")
@click.argument("key")
@FORMAT_OPTION
@data_command
def kv_get(scope: str, ns: str, key: str, fmt: str, url: str | None, prefix: str, as_json: bool) -> None:
    """Print one value (exit 3 when the key has no live value; a log or counter there is named).

    Text is printed with control characters escaped (line breaks and tabs
    kept); --format hex or --json give the exact bytes.
    """
    s, n, k = _address(scope, ns, key)
    with store_from(url, prefix, read_only=True) as store:
        value = store.kv.get(s, n, k)
        if value is None:
            other = []
            if kvlisting.has_log(store.engine, s, n, k):
                other.append("a log (durastate kv log SCOPE NS KEY)")
            if kvlisting.counter(store.engine, s, n, k) is not None:
                other.append("a counter (durastate kv counter SCOPE NS KEY)")
            where = f"{escape(scope)} / {escape(ns)} / {escape(key)}"
            raise NotFound(f"no value at {where}" + (f"; it holds {' and '.join(other)}" if other else ""))
    shown = render_value(value, fmt)
    if as_json:
        print_json({"scope": s, "ns": n, "key": k, "value": shown, "size": len(value)})
    elif isinstance(shown, bytes):
        click.echo(show_value(shown, keep_newlines=True))
    elif fmt == "json":
        print_json(shown)
    else:
        click.echo(shown)


@kv.command("scan")
@click.argument("scope")
@click.argument("ns")
@click.option("--prefix", "key_prefix", default=None, help="Only keys starting with this.")
@click.option("--start", default=None, help="First key (inclusive).")
@click.option("--end", default=None, help="Last key (exclusive).")
@click.option("--reverse", is_flag=True, help="Descending key order.")
@after_option("Keys after this one in the scan's order: the cursor the previous page printed.")
@LIMIT
@FORMAT_OPTION
@data_command
def kv_scan(
    scope: str,
    ns: str,
    key_prefix: str | None,
    start: str | None,
    end: str | None,
    reverse: bool,
    after: str | None,
    limit: int,
    fmt: str,
    url: str | None,
    prefix: str,
    as_json: bool,
) -> None:
    """List the live values of a namespace in key order (prefix or [start, end) range)."""
    lo = None if start is None else parse_bytes(start)
    hi = None if end is None else parse_bytes(end)
    if key_prefix is not None:
        if lo is not None or hi is not None:
            raise click.UsageError("--prefix cannot be combined with --start/--end")
        lo, hi = parse_bytes(key_prefix), bytes_successor(parse_bytes(key_prefix))
    s, n = parse_bytes(scope), parse_bytes(ns)
    with store_from(url, prefix, read_only=True) as store:

        def fetch(last: bytes | None, want: int) -> list[tuple[bytes, bytes]]:
            start_at, end_at = lo, hi
            if last is not None and reverse:
                end_at = last if end_at is None else min(end_at, last)
            elif last is not None:
                start_at = last + b"\x00"  # the smallest key after it
            return list(store.kv.scan(s, n, start=start_at, end=end_at, reverse=reverse, limit=want))

        pairs, more = take_page(fetch, None if after is None else parse_bytes(after), limit, lambda kv: kv[0])
    rows = [{"key": Name(k), "value": render_value(v, fmt), "size": len(v)} for k, v in pairs]
    emit_page(rows, more, as_json, ["key", "value", "size"], whole="durastate kv get SCOPE NS KEY")


@kv.command("log")
@click.argument("scope")
@click.argument("ns")
@click.argument("key", required=False)
@after_option("Without KEY: log keys after this one; with KEY: entries after this ordinal.")
@LIMIT
@FORMAT_OPTION
@data_command
def kv_log(
    scope: str,
    ns: str,
    key: str | None,
    after: str | None,
    limit: int,
    fmt: str,
    url: str | None,
    prefix: str,
    as_json: bool,
) -> None:
    """List the logs of a namespace (entries, ordinals, last append), or the entries of the log KEY.

    Exit 3 when KEY has no log entries.
    """
    s, n = parse_bytes(scope), parse_bytes(ns)
    with store_from(url, prefix, read_only=True) as store:
        engine = store.engine
        if key is None:
            logs, more = take_page(
                lambda a, want: kvlisting.log_keys(engine, s, n, b"" if a is None else a, want),
                None if after is None else parse_bytes(after),
                limit,
                lambda log: log.key,
            )
            rows = [
                {
                    "key": Name(g.key),
                    "entries": g.entries,
                    "first": g.first,
                    "last": g.last,
                    "last_append": at(g.last_at),
                }
                for g in logs
            ]
            emit_page(rows, more, as_json, ["key", "entries", "first", "last", "last_append"])
            return
        k = parse_bytes(key)
        start = 0 if after is None else int64_argument(after, "--after", "an entry cursor is an ordinal")
        entries, more = take_page(
            lambda a, want: kvlisting.log_entries(engine, s, n, k, a, want), start, limit, lambda e: e[0]
        )
        if not entries and after is None:
            raise NotFound(f"no log at {escape(scope)} / {escape(ns)} / {escape(key)}")
    rows = [{"ordinal": o, "appended": at(t), "value": render_value(v, fmt), "size": len(v)} for o, v, t in entries]
    emit_page(rows, more, as_json, ["ordinal", "appended", "value", "size"])


@kv.command("counter")
@click.argument("scope")
@click.argument("ns")
@click.argument("key", required=False)
@after_option("Counters after this key: the cursor the previous page printed.")
@LIMIT
@data_command
def kv_counter(
    scope: str, ns: str, key: str | None, after: str | None, limit: int, url: str | None, prefix: str, as_json: bool
) -> None:
    """List the counters of a namespace with their values, or print the counter KEY (exit 3 when absent)."""
    s, n = parse_bytes(scope), parse_bytes(ns)
    with store_from(url, prefix, read_only=True) as store:
        engine = store.engine
        if key is not None:
            value = kvlisting.counter(engine, s, n, parse_bytes(key))
            if value is None:
                raise NotFound(f"no counter at {escape(scope)} / {escape(ns)} / {escape(key)}")
            if as_json:
                print_json({"scope": s, "ns": n, "key": parse_bytes(key), "value": value})
            else:
                click.echo(str(value))
            return
        found, more = take_page(
            lambda a, want: store.kv.counters(s, n, after=a, limit=want),
            None if after is None else parse_bytes(after),
            limit,
            lambda c: c[0],
        )
    emit_page([{"key": Name(k), "value": v} for k, v in found], more, as_json, ["key", "value"])
