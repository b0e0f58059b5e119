"""Find or start a PostgreSQL server for the test suite, and isolate tests.

Order of preference:

1. ``DURASTATE_TEST_POSTGRES_URL`` (CI sets it to the machine's server);
2. a throwaway cluster made with ``initdb``/``pg_ctl`` from PATH (or the
   Debian/Ubuntu ``/usr/lib/postgresql/*/bin``), run as the ``postgres``
   user when the suite runs as root, removed at exit;
3. nothing: the PostgreSQL half of the suite is skipped with the reason.

Each test gets its own schema in that server (``search_path`` set through
the URL), dropped afterwards or emptied for a later test of the same
process (``SchemaPool``), so runs and tests never see each other's rows.
Given a server, the suite's run works in a database of its own there
(``run_database``, made and dropped by ``tests/conftest.py``), and the
catalogs that schemas churn are vacuumed every ``VACUUM_EVERY`` drops: a
server without autovacuum would otherwise keep every dead catalog row.
"""

from __future__ import annotations

import atexit
import glob
import os
import re
import shutil
import socket
import subprocess
import tempfile
import uuid
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

ENV_URL = "DURASTATE_TEST_POSTGRES_URL"
# A Citus coordinator (citus.enable_schema_based_sharding on: every test schema is a distributed schema).
ENV_CITUS_URL = "DURASTATE_TEST_CITUS_URL"

_cached: tuple[str | None, str] | None = None


def _find_binaries() -> tuple[str, str] | None:
    initdb = shutil.which("initdb")
    pg_ctl = shutil.which("pg_ctl")
    if initdb and pg_ctl:
        return initdb, pg_ctl
    for bindir in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        i, p = os.path.join(bindir, "initdb"), os.path.join(bindir, "pg_ctl")
        if os.access(i, os.X_OK) and os.access(p, os.X_OK):
            return i, p
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _start_throwaway_cluster() -> tuple[str | None, str]:
    found = _find_binaries()
    if found is None:
        return None, "no DURASTATE_TEST_POSTGRES_URL and no initdb/pg_ctl on PATH"
    initdb, pg_ctl = found
    datadir = tempfile.mkdtemp(prefix="durastate-pg-")
    as_postgres: list[str] = []
    if os.geteuid() == 0:
        # initdb refuses to run as root; test helpers may switch to postgres.
        try:
            import pwd

            pw = pwd.getpwnam("postgres")
        except KeyError:
            return None, "running as root and there is no 'postgres' user to run initdb as"
        os.chown(datadir, pw.pw_uid, pw.pw_gid)
        as_postgres = ["runuser", "-u", "postgres", "--"]
    port = _free_port()
    try:
        subprocess.run(
            [*as_postgres, initdb, "-D", datadir, "-A", "trust", "-U", "postgres", "--no-sync"],
            check=True,
            capture_output=True,
        )
        subprocess.run(
            [
                *as_postgres,
                pg_ctl,
                "-D",
                datadir,
                "-w",
                "-o",
                f"-p {port} -k {datadir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200",
                "-l",
                os.path.join(datadir, "log"),
                "start",
            ],
            check=True,
            capture_output=True,
        )
    except (subprocess.CalledProcessError, OSError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        return None, f"could not start a throwaway cluster: {exc} {detail.decode(errors='replace')[-300:]}"

    def stop() -> None:
        subprocess.run([*as_postgres, pg_ctl, "-D", datadir, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(datadir, ignore_errors=True)

    atexit.register(stop)
    return f"postgresql://postgres@127.0.0.1:{port}/postgres", ""


def server_url() -> tuple[str | None, str]:
    """``(url, "")`` of a usable server, or ``(None, reason)``. Cached."""
    global _cached
    if _cached is None:
        url = os.environ.get(ENV_URL)
        _cached = (url, "") if url else _start_throwaway_cluster()
    return _cached


# A database of one test run's own (``run_database``), on the server the run was given.
RUN_DATABASE_PREFIX = "durastate_test_"
_RUN_COMMENT = "durastate test run: host={host} pid={pid}"
_RUN_COMMENT_PATTERN = re.compile(r"durastate test run: host=(?P<host>\S+) pid=(?P<pid>\d+)")  # reads it back


def run_database(url: str) -> tuple[str, str]:
    """Create a database for this test run on ``url``'s server: ``(its URL, "")``.

    The suite's schemas then live and die in it, and dropping it at the end
    (``drop_run_database``) takes every catalog row they wrote with it: a
    server that does not vacuum (autovacuum off) otherwise keeps them in the
    given database, and each run is slower than the one before. The
    extensions installed in ``url``'s database (pgvector) are installed in
    it too, where the server allows. A run database left by a process of
    this host that no longer runs (a killed run) is dropped first.

    ``(url, reason)`` when that cannot be done (not a URL, no right to
    create a database): the run works in ``url``'s database, as before.
    """
    import psycopg

    parts = urlsplit(url)
    if not parts.scheme.startswith("postgres") or not parts.path.strip("/"):
        return url, f"{url!r} names no database to stand beside"
    host, pid = socket.gethostname(), os.getpid()
    name = f"{RUN_DATABASE_PREFIX}{pid}_{uuid.uuid4().hex[:8]}"
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            _drop_abandoned_run_databases(conn, host)
            extensions = conn.execute(
                "SELECT e.extname, n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
                " WHERE e.extname <> 'plpgsql'"
            ).fetchall()
            conn.execute(f'CREATE DATABASE "{name}"')
            conn.execute(f"COMMENT ON DATABASE \"{name}\" IS '{_RUN_COMMENT.format(host=host, pid=pid)}'")
    except psycopg.Error as exc:
        return url, f"could not create a database for the run: {exc}"
    run_url = urlunsplit(parts._replace(path="/" + name))
    try:
        with psycopg.connect(run_url, autocommit=True) as conn:
            for extension, schema in extensions:
                try:
                    conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
                    conn.execute(f'CREATE EXTENSION IF NOT EXISTS "{extension}" SCHEMA "{schema}"')
                except psycopg.Error:
                    pass  # the tests that need it say so when they skip
    except psycopg.Error as exc:  # made but not reachable: not left behind
        drop_run_database(url, run_url)
        return url, f"could not connect to the run's database: {exc}"
    return run_url, ""


def drop_run_database(base_url: str, run_url: str) -> None:
    """Drop the database ``run_database(base_url)`` made (its sessions ended first)."""
    import psycopg

    name = urlsplit(run_url).path.strip("/")
    if not name.startswith(RUN_DATABASE_PREFIX):
        return
    _forget_database(run_url)
    with psycopg.connect(base_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _forget_database(url: str) -> None:
    """This process's schema pools and admin connection on ``url``, let go before its database is dropped.

    Their schemas go with the database. Without this a run in one process
    (no xdist workers, whose pools close when they exit) dropped the
    database in ``pytest_unconfigure`` and then, at exit, each pool's
    ``close`` connected to it again to drop schemas that no longer
    existed: "Exception ignored in atexit callback" and a connection error
    at the end of every such run.
    """
    for key in [key for key in _pools if key[0] == url]:
        _pools.pop(key).discard()
    conn = _admin_connections.pop(url, None)
    if conn is not None and _admin_pid == os.getpid():
        conn.close()


def _drop_abandoned_run_databases(conn: Any, host: str) -> None:
    """Drop the run databases of processes of ``host`` that have exited."""
    import psycopg

    rows = conn.execute(
        "SELECT datname, shobj_description(oid, 'pg_database') FROM pg_database WHERE starts_with(datname, %s)",
        (RUN_DATABASE_PREFIX,),
    ).fetchall()
    for name, comment in rows:
        found = _RUN_COMMENT_PATTERN.fullmatch(comment or "")
        if found is None or found["host"] != host or _alive(int(found["pid"])):
            continue
        try:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        except psycopg.Error:
            pass  # another run's cleanup got there first, or it is not ours to drop


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, another user's
    return True


def with_search_path(url: str, schema: str) -> str:
    """``url`` with its sessions' ``search_path`` set to ``schema``."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "options"]
    query.append(("options", f"-csearch_path={schema}"))
    return urlunsplit(parts._replace(query=urlencode(query)))


# One autocommit connection per process and server URL for creating and dropping schemas: a new server
# session for each (as before) cost ~5.6 ms of server CPU, two per test that takes a fresh schema.
_admin_connections: dict[str, Any] = {}
_admin_pid = os.getpid()


@atexit.register
def _close_admin_connections() -> None:
    """Close this process's admin connections at exit (a forked child's inherited ones are its parent's: left)."""
    if _admin_pid == os.getpid():
        for conn in _admin_connections.values():
            conn.close()
    _admin_connections.clear()


def _admin_execute(url: str, statement: str, params: tuple[Any, ...] | None = None) -> list[tuple[Any, ...]]:
    """Run ``statement`` on this process's connection to ``url``, connecting again once if it was lost; its rows."""
    global _admin_pid
    import psycopg

    if _admin_pid != os.getpid():  # a forked child: its parent's connections are not its to use
        _admin_connections.clear()
        _admin_pid = os.getpid()
    conn = _admin_connections.get(url)
    if conn is not None:
        try:
            return _rows(conn.execute(statement, params))
        except psycopg.OperationalError:  # the session was ended (a test terminating backends, a restart)
            conn.close()
    _admin_connections[url] = conn = psycopg.connect(url, autocommit=True)
    return _rows(conn.execute(statement, params))


def _rows(cursor: Any) -> list[tuple[Any, ...]]:
    return cursor.fetchall() if cursor.description is not None else []


def create_schema(url: str) -> tuple[str, str]:
    """Create a fresh schema; return ``(url bound to it, schema name)``."""
    schema = "t_" + uuid.uuid4().hex[:16]
    _admin_execute(url, f"CREATE SCHEMA {schema}")
    return with_search_path(url, schema), schema


def drop_schema(url: str, schema: str) -> None:
    """Drop ``schema`` and what it holds; every ``VACUUM_EVERY`` drops in this process, vacuum the catalogs.

    A schema's life writes about 1,100 catalog rows and deletes them again
    (pg_attribute most). A server whose autovacuum is off (this machine
    kind's) never reclaims them, and its catalogs grow with each run: the
    suite's server work had doubled after a few runs. The vacuum makes the
    space reusable, so the catalogs stop growing; without the rights to
    vacuum them (superuser or the database's owner) the server only warns.
    """
    global _drops_since_vacuum
    import psycopg

    [(relations,)] = _admin_execute(url, RELATIONS_IN_SCHEMA, (schema,))
    try:
        if relations > DROP_AT_ONCE:
            _drop_in_parts(url, schema)
        else:
            _admin_execute(url, f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    except psycopg.errors.OutOfMemory:  # the server's shared lock table is full (see _drop_in_parts)
        _drop_in_parts(url, schema)
    _drops_since_vacuum += 1
    if _drops_since_vacuum >= VACUUM_EVERY:
        _drops_since_vacuum = 0
        _admin_execute(url, "VACUUM " + ", ".join(f"pg_catalog.{name}" for name in CHURNED_CATALOGS))


# A schema of more relations (tables, indexes, sequences) than this is dropped in parts from the start
# (_drop_in_parts): one store's schema is ~65 relations and its DROP takes ~200 locks, so a model-based test's
# schema of one store per example (25: ~1,600 relations, ~5,000 locks) would take most of the server's shared lock
# table (max_locks_per_transaction x max_connections: 6,400 on a default server) in one transaction.
DROP_AT_ONCE = 400
# Tables dropped per statement when a schema is too large to drop in one (_drop_in_parts): ~1,000 locks.
DROP_PART = 100
# read: how many relations ``schema`` holds (0 for a schema that does not exist).
RELATIONS_IN_SCHEMA = "SELECT count(*) FROM pg_class WHERE relnamespace = to_regnamespace(%s)"


def _drop_in_parts(url: str, schema: str) -> None:
    """Drop ``schema``'s tables ``DROP_PART`` at a time, each in a transaction of its own, then the schema.

    ``DROP SCHEMA ... CASCADE`` locks every object of the schema in one
    transaction, and the server's lock table is shared by all sessions
    (``max_locks_per_transaction`` x connections): a schema holding many
    tables (a model-based test's, one set per example) dropped while other
    tests hold locks can run out of it (SQLSTATE 53200, seen once in CI),
    and fail another session's statement in the moment it does. So a schema
    of more than ``DROP_AT_ONCE`` relations is dropped this way from the
    start, and any other whose drop is refused so.
    """
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        tables = [row[0] for row in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,))]
        for start in range(0, len(tables), DROP_PART):
            names = ", ".join(f'"{schema}"."{table}"' for table in tables[start : start + DROP_PART])
            conn.execute(f"DROP TABLE IF EXISTS {names} CASCADE")
    _admin_execute(url, f"DROP SCHEMA IF EXISTS {schema} CASCADE")


# The catalogs a schema's creation and drop leave dead rows in, vacuumed every VACUUM_EVERY drops.
CHURNED_CATALOGS = (
    "pg_attribute",
    "pg_depend",
    "pg_class",
    "pg_index",
    "pg_type",
    "pg_constraint",
    "pg_attrdef",
    "pg_trigger",
    "pg_proc",
    "pg_statistic",
    "pg_sequence",
    "pg_namespace",
)
VACUUM_EVERY = 100
_drops_since_vacuum = 0


# Everything about a schema that a fresh migration decides, as one digest: its relations (kind and
# column count, dropped columns included), functions (with their source) and triggers; and how many of
# its tables were ever analyzed or vacuumed (none, in a fresh schema: planner statistics are part of
# what a test may depend on). Every lookup goes through a catalog index: the schema's tables, sequences
# and functions are found by their dependency on the namespace (pg_depend's index on the referenced
# object), indexes, triggers and statistics by their table. pg_class and pg_proc have no index on the
# namespace alone, and a scan of them costs as much as the catalogs are long: the suite creates and drops
# thousands of schemas, and on a server that does not vacuum (autovacuum off) those catalogs only grow.
_SCHEMA_DIGEST = """
WITH owned AS (
  SELECT d.classid, d.objid FROM pg_depend d
   WHERE d.refclassid = 'pg_namespace'::regclass
     AND d.refobjid = (SELECT n.oid FROM pg_namespace n WHERE n.nspname = %s)),
tables AS (
  SELECT c.oid, c.relname, c.relkind, c.relnatts, c.reltuples
    FROM owned o JOIN pg_class c ON c.oid = o.objid WHERE o.classid = 'pg_class'::regclass),
relations AS (
  SELECT t.oid, t.relname, t.relkind, t.relnatts FROM tables t
  UNION ALL
  SELECT c.oid, c.relname, c.relkind, c.relnatts
    FROM tables t JOIN pg_index i ON i.indrelid = t.oid JOIN pg_class c ON c.oid = i.indexrelid)
SELECT md5(concat_ws('|',
  (SELECT string_agg(r.relname || ':' || r.relkind::text || ':' || r.relnatts, ',' ORDER BY r.relname)
     FROM relations r),
  (SELECT string_agg(p.proname || ':' || md5(p.prosrc), ',' ORDER BY p.proname)
     FROM owned o JOIN pg_proc p ON p.oid = o.objid WHERE o.classid = 'pg_proc'::regclass),
  (SELECT string_agg(g.tgname, ',' ORDER BY g.tgname) FROM tables t JOIN pg_trigger g ON g.tgrelid = t.oid),
  (SELECT count(*) FROM tables t WHERE t.relkind = 'r' AND t.reltuples >= 0),
  (SELECT count(*) FROM relations r JOIN pg_statistic s ON s.starelid = r.oid)))
"""
_TABLES = "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename"
_SEQUENCES = "SELECT sequencename FROM pg_sequences WHERE schemaname = %s ORDER BY sequencename"


class SchemaPool:
    """Schemas as a fresh migration leaves them, emptied after use and handed out again.

    Creating a schema and migrating every facet into it costs about 100 ms
    of server CPU (19 tables with their TOAST tables, 22 indexes), and
    dropping it another commit: far more than most tests then do with it.
    ``take()`` hands out a schema a previous user gave back, or a new one
    (the first ``durastate.open`` migrates it). ``give_back()`` empties it
    for the next user when its objects are still exactly those of a
    template schema migrated once with ``prefix`` and none of its tables was
    ever analyzed: every table's rows deleted, the rows migration writes
    (facet versions, sequence counters) copied back from the template,
    identity sequences restarted, all in one transaction. What the next
    user opens is then, row for row, a freshly migrated store. Any other
    schema (a store opened with another prefix, DDL run by the test,
    statistics gathered) is dropped.

    What still differs from a fresh schema: the tables' files keep the
    pages of the deleted rows until autovacuum reclaims them. Tests whose
    subject is migration, opening an empty schema, or plans on fresh tables
    take ``create_schema`` instead.

    One pool per process and server (``schema_pool``); not thread-safe.
    """

    def __init__(self, base_url: str, prefix: str = "ds_", *, citus: bool = False) -> None:
        self.base_url = base_url
        self.prefix = prefix
        self.citus = citus  # the template is migrated in the Citus statement mode (citus://)
        self._spare: list[tuple[str, str]] = []  # (url, schema), emptied
        self._admin: Any = None  # one autocommit connection for emptying and checking
        self._template: str | None = None  # migrated once: the model of an emptied schema
        self._template_digest: str | None = None
        self._reset: str | None = None  # the emptying script, {schema} to fill

    def take(self) -> tuple[str, str]:
        """``(url bound to it, schema name)``: an emptied schema, or a new one."""
        return self._spare.pop() if self._spare else create_schema(self.base_url)

    def give_back(self, url: str, schema: str) -> None:
        """Empty ``schema`` for a later ``take``, or drop it (see the class docstring).

        Every store on it must be closed. A schema that cannot be emptied is
        dropped before the error goes on.
        """
        try:
            wanted = self._template_digest or self._prepare_template()
            if self._digest(schema) == wanted:
                assert self._reset is not None
                self._connection().execute(self._reset.format(schema=schema))
                self._spare.append((url, schema))
                return
        except BaseException:
            drop_schema(self.base_url, schema)
            raise
        drop_schema(self.base_url, schema)

    def discard(self) -> None:
        """Forget the pool's schemas without dropping them (their database is being dropped); close its
        connection. ``close`` then has nothing left to do."""
        self._spare.clear()
        self._template = self._template_digest = None
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def close(self) -> None:
        """Drop every schema the pool holds, and the template."""
        schemas = [schema for _url, schema in self._spare]
        if self._template is not None:
            schemas.append(self._template)
        self.discard()  # forgotten first: a drop that fails is not tried again by a second close
        for schema in schemas:
            drop_schema(self.base_url, schema)

    def _connection(self) -> Any:
        import psycopg

        if self._admin is None or self._admin.closed:
            self._admin = psycopg.connect(self.base_url, autocommit=True)
        return self._admin

    def _digest(self, schema: str) -> str:
        row = self._connection().execute(_SCHEMA_DIGEST, (schema,)).fetchone()
        return str(row[0])

    def _prepare_template(self) -> str:
        """Migrate the template; derive the emptying script from what it holds; its digest."""
        import durastate

        url, schema = create_schema(self.base_url)
        self._template = schema  # dropped by close() whatever happens next
        durastate.open(as_citus(url) if self.citus else url, prefix=self.prefix).close()
        conn = self._connection()
        tables = [row[0] for row in conn.execute(_TABLES, (schema,))]
        sequences = [row[0] for row in conn.execute(_SEQUENCES, (schema,))]
        seeded = [t for t in tables if conn.execute(f'SELECT 1 FROM "{schema}"."{t}" LIMIT 1').fetchone()]
        statements = [
            "BEGIN",
            *(f'DELETE FROM "{{schema}}"."{t}"' for t in tables),
            *(f'INSERT INTO "{{schema}}"."{t}" SELECT * FROM "{schema}"."{t}"' for t in seeded),
            *(f'ALTER SEQUENCE "{{schema}}"."{s}" RESTART' for s in sequences),
            "COMMIT",
        ]
        self._reset = ";\n".join(statements)
        self._template_digest = self._digest(schema)
        return self._template_digest


_pools: dict[tuple[str, bool], SchemaPool] = {}


def schema_pool(base_url: str, *, citus: bool = False) -> SchemaPool:
    """This process's ``SchemaPool`` for ``base_url`` (default prefix; ``citus``: Citus mode), closed at exit."""
    pool = _pools.get((base_url, citus))
    if pool is None:
        pool = _pools[base_url, citus] = SchemaPool(base_url, citus=citus)
        atexit.register(pool.close)
    return pool


def as_citus(url: str) -> str:
    """``url`` (``postgresql://...``) opened in the Citus statement mode: ``citus://...``."""
    return "citus://" + url.split("://", 1)[1]


def citus_url() -> tuple[str | None, str]:
    """``(url, "")`` of a Citus coordinator (``DURASTATE_TEST_CITUS_URL``), or ``(None, reason)``."""
    url = os.environ.get(ENV_CITUS_URL)
    if url:
        return url, ""
    return None, f"no Citus cluster configured: set {ENV_CITUS_URL} to a coordinator's postgresql:// URL"
