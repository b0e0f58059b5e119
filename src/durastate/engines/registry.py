"""Engines by URL scheme: ``durastate.open(url)`` asks this registry.

Built in: ``sqlite`` (a path, ``sqlite:...``, ``memory:``) and
``postgresql``/``postgres``. A third-party engine registers its scheme,
either in code::

    from durastate.engines import registry
    registry.register("myengine", lambda url, options: MyEngine(url, **options))

or with a ``durastate.engines`` entry point named after the scheme, whose
object is such a factory (loaded the first time the scheme is opened).

A factory gets the URL and the options of ``durastate.open`` (``prefix``,
``durability``, ``busy_timeout``, ``clock``, ``min_connections``,
``max_connections``, ``read_only``, and ``attempt_retention`` when the
caller gave one) and returns an engine (see ``engines.base``): an
``EngineBase`` subclass gets the transaction machine, migrations and
statement compilation for free. It takes the options that apply to it and
ignores the rest.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, NoReturn

from .._validate import as_attempt_retention, as_pool_sizes
from ..errors import ConfigurationError, InvalidRequest
from .redact import redact_url

if TYPE_CHECKING:
    from .base import Engine

__all__ = ["DEFAULT_PATH", "EngineFactory", "create", "file_of", "register", "registered", "scheme_of"]

EngineFactory = Callable[[str, dict[str, Any]], "Engine"]
ENTRY_POINT_GROUP = "durastate.engines"
SCHEME_RE = re.compile(r"^[a-z][a-z0-9+.-]*$")
# Options only an engine with a connection pool uses (a factory of an engine
# without one drops them; open() has already checked them).
POOL_OPTIONS = ("min_connections", "max_connections")
# Options only an engine with a server behind it uses: the pool sizes, and
# how long a network engine keeps its write attempts (open() has checked
# it, and passes it only when the caller gave one). An engine without a
# server drops them all.
SERVER_OPTIONS = (*POOL_OPTIONS, "attempt_retention")

_lock = threading.Lock()
_factories: dict[str, EngineFactory] = {}


def register(scheme: str, factory: EngineFactory) -> None:
    """Make ``durastate.open("<scheme>:...")`` use ``factory`` (replacing any earlier one)."""
    if not isinstance(scheme, str) or not SCHEME_RE.match(scheme):
        raise InvalidRequest(f"engine scheme must match {SCHEME_RE.pattern}, got {scheme!r}")
    if not callable(factory):
        raise InvalidRequest(f"engine factory for {scheme!r} must be callable, got {type(factory).__name__}")
    with _lock:
        _factories[scheme] = factory


def registered() -> list[str]:
    """The schemes known now (entry points not yet loaded are not listed)."""
    with _lock:
        return sorted(_factories)


def scheme_of(url: str | os.PathLike[str] | None) -> str:
    """The engine scheme of a store URL: a plain path or ``memory:`` is ``sqlite``."""
    if url is None or isinstance(url, os.PathLike):
        return "sqlite"
    if not isinstance(url, str):
        raise InvalidRequest(f"store URL must be a str or path, got {type(url).__name__}")
    head, sep, _rest = url.partition(":")
    if not sep or head in ("memory", "") or len(head) == 1:  # a path; ":memory:"; C:\\ on Windows
        return "sqlite"
    scheme = head.lower()
    if "://" not in url and scheme not in _factories and not _entry_point(scheme):
        return "sqlite"  # a relative path with a colon in it
    return scheme


def _entry_point(scheme: str) -> EngineFactory | None:
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name == scheme:
            factory: EngineFactory = point.load()
            register(scheme, factory)
            return factory
    return None


def create(url: str | os.PathLike[str] | None, options: dict[str, Any]) -> Engine:
    """An engine for ``url`` (not yet migrated), from its scheme's factory."""
    scheme = scheme_of(url)
    with _lock:
        factory = _factories.get(scheme)
    if factory is None:
        factory = _entry_point(scheme)
    if factory is None:
        if scheme == "file":
            _refuse_file_url(str(url))
        known = ", ".join(f"{s}:" for s in registered())
        raise ConfigurationError(f"unknown store URL scheme {scheme!r} in {url!r}: known schemes are {known}")
    return factory(url if isinstance(url, str) else ("" if url is None else _literal_path(url)), dict(options))


def _literal_path(path: os.PathLike[str]) -> str:
    """A path object's text, made unmistakable for a URL: ``Path("file:x.db")`` is the file ``./file:x.db``."""
    text = os.fspath(path)
    if ":" in text and not os.path.isabs(text):
        return os.path.join(os.curdir, text)
    return text


# -- the built-in engines ----------------------------------------------------------

_MEMORY_URLS = {"memory:", ":memory:", "sqlite://:memory:", "sqlite:///:memory:", "sqlite::memory:"}
# The store ``durastate.open()`` (and every command without --url) opens.
DEFAULT_PATH = os.path.join(".durastate", "state.db")


def file_of(url: str | os.PathLike[str] | None) -> str | None:
    """The SQLite file a store URL names (``DEFAULT_PATH`` for ``None``), or ``None`` when it names no file.

    ``None`` for an in-memory store and for every other engine's scheme
    (``postgresql://``, ``citus://``, a third party's): the one parser of
    store URLs, shared by ``durastate.open`` and the command line.
    ``InvalidRequest`` for a malformed SQLite URL, as ``open`` gives.
    """
    if url is None:
        return DEFAULT_PATH
    if scheme_of(url) != "sqlite":
        return None
    return sqlite_path(url if isinstance(url, str) else _literal_path(url))


def sqlite_path(url: str) -> str | None:
    """The file path for a SQLite URL or path; ``None`` for in-memory; ``""`` for the default.

    A ``sqlite:`` URL takes no options: ``?`` in one starts a query string,
    refused naming its options, and ``#`` a fragment, refused naming it (a
    file whose name has a ``?`` or ``#`` in it is given as a plain path,
    which is always taken literally). ``file:``
    (SQLite's own URI form) and ``memory:`` with anything after it are
    refused rather than taken as relative file names.
    """
    if url in _MEMORY_URLS:
        return None
    if url.startswith("sqlite:"):
        rest = url[len("sqlite:") :]
        if rest.startswith("//"):
            rest = rest[len("//") :]
            if not rest.startswith("/"):
                raise ConfigurationError(
                    f"sqlite URL {url!r}: use sqlite:///absolute/path.db or sqlite:relative/path.db"
                )
        # As in any URL, a fragment starts at the first "#", past the query if there is one.
        before_fragment, has_fragment, fragment = rest.partition("#")
        if "?" in before_fragment:
            _refuse_query(url, before_fragment.partition("?")[2])
        if has_fragment:
            _refuse_fragment(url, fragment)
        return rest
    head = url[:7].lower()
    if head.startswith("file:"):
        _refuse_file_url(url)
    if head == "memory:":
        raise ConfigurationError(f"store URL {url!r}: memory: takes nothing after the colon")
    if "://" in url:
        raise ConfigurationError(
            f"unknown store URL {url!r}: expected a path, sqlite:///path.db, memory:, or postgresql://..."
        )
    return url


def _refuse_query(url: str, query: str) -> NoReturn:
    names = sorted({item.partition("=")[0] for item in query.split("&") if item})
    what = f"unknown URL option(s) {', '.join(map(repr, names))}" if names else "an empty query string"
    raise ConfigurationError(
        f"sqlite URL {url!r}: {what}: a sqlite: URL takes no options "
        "(give open() keywords instead, read_only=True for a read-only store); "
        "a file whose name contains '?' is opened by its plain path"
    )


def _refuse_fragment(url: str, fragment: str) -> NoReturn:
    what = f"a fragment {'#' + fragment!r}" if fragment else "an empty fragment ('#')"
    raise ConfigurationError(
        f"sqlite URL {url!r}: {what}: a sqlite: URL takes no fragment; "
        "a file whose name contains '#' is opened by its plain path"
    )


def _refuse_file_url(url: str) -> NoReturn:
    raise ConfigurationError(
        f"store URL {url!r}: file: URLs are not store URLs; give the file's path, "
        "or sqlite:///absolute/path.db (options as open() keywords, read_only=True for mode=ro)"
    )


def _sqlite(url: str, options: dict[str, Any]) -> Engine:
    from .sqlite import SqliteEngine

    # Checked, then dropped: SQLite has one connection per thread, no pool,
    # and its writes are never retried, so it keeps no attempt rows.
    as_pool_sizes(options.pop("min_connections", 1), options.pop("max_connections", 10))
    attempt_retention = options.pop("attempt_retention", None)
    if attempt_retention is not None:
        as_attempt_retention(attempt_retention)
    path = sqlite_path(url)
    if path == "":
        raise ConfigurationError("store path must not be empty")
    return SqliteEngine(path, **options)


def _postgres(url: str, options: dict[str, Any]) -> Engine:
    try:
        from .postgres import PostgresEngine
    except ImportError as exc:  # psycopg missing
        raise InvalidRequest(
            f"opening {redact_url(url)!r} needs the PostgreSQL driver: pip install 'durastate[postgres]' ({exc})"
        ) from None
    return PostgresEngine(url, **options)


def _citus(url: str, options: dict[str, Any]) -> Engine:
    """``citus://...``: PostgreSQL in the Citus-compatible statement mode (``durastate.citus``).

    The rest of the URL is a ``postgresql://`` URL (a Citus coordinator, or
    any PostgreSQL server: the mode runs there too).
    """
    return _postgres("postgresql://" + url.split("://", 1)[1], {**options, "citus": True})


register("sqlite", _sqlite)
register("postgresql", _postgres)
register("postgres", _postgres)
register("citus", _citus)
