"""functualize's substrate on durastate: a drop-in for ``functualize_state_sqlite``.

functualize (a workflow framework) keeps every run's documents - scope
state, step records, approvals - in one ``StoreSubstrate``. The
``functualize-state-sqlite`` plugin supplies ``SQLiteSubstrate``, one SQLite
table behind six methods. This module gives the same classes with the same
methods, signatures, return values and edge cases, backed by durastate's
``store.documents``, so the same code runs on an SQLite file or on
PostgreSQL (which is what makes a gate blocked on one runner resumable on
another machine)::

    from durastate.compat.functualize import SQLiteSubstrate

    substrate = SQLiteSubstrate("postgresql://db.internal/runs")   # or a path
    stored = substrate.read("scope-state/run-1")                    # Stored(data, revision) | None
    substrate.write("scope-state/run-1", {"step": 2}, expect=stored.revision)   # -> bool
    with substrate.lock("scope-state/run-1", "scopes/run-1"):
        ...

What is here (the seed's names):

* ``SQLiteSubstrate(path)``: ``path`` is a file path (``str`` or
  ``os.PathLike``; its folder is created, as the seed does) or a durastate
  URL (``sqlite:///abs.db``, ``sqlite:rel.db``, ``memory:``,
  ``postgresql://...``). Methods:

  - ``path``: the database file as a ``Path`` (for URLs that name no file:
    the store's URL, password removed, as a ``str``);
  - ``read(key) -> Stored | None``; raises ``SubstrateUnreadableError(key,
    reason)`` for a payload that is not JSON, or is JSON but not an object;
  - ``write(key, payload, *, expect=None) -> bool``: ``expect=None`` always
    writes (``True``); ``expect=rev`` writes only if the document is at that
    revision, else ``False``. Revisions start at 1, so (exactly as in the
    seed) ``expect=0`` - or any number below 1 - never matches: ``False``,
    nothing written, even for an absent key;
  - ``lock(*keys)``: a context manager; ONE re-entrant transaction covering
    every key (deadlock-free by construction, see ``durastate.documents``);
  - ``clear(key) -> str | None``: moves the payload, undecoded, to
    ``key.bak`` (then ``key.bak.1``, ...); returns ``"<path>#<backup key>"``,
    or ``None`` if absent;
  - ``delete(key) -> bool``;
  - ``describe(key) -> str``: ``"<path>#<key> (<n> B)"``, ``"<path>#<key>
    (absent)"``; for a key ending in ``/`` the aggregate over that prefix:
    ``"<n> document(s), <total> B in <path>"`` or ``"empty"``.
* ``Stored(data, revision)``, ``SubstrateUnreadableError(key, reason)``.
  When functualize itself is importable, the error raised is also an
  instance of functualize's own ``SubstrateUnreadableError``, constructed
  with the signature the installed functualize has (``(key, detail)`` in
  0.3.x and 0.4.x; its message is functualize's), so the framework's
  ``except`` clauses and stores (``FreshStore`` degrading, ``ScopeStore``
  refusing) behave as on the seed.
* ``SQLiteStatePlugin``: the plugin shape of the seed. Calling it with the
  app registers a hook on ``APP_READY`` that installs a ``SQLiteSubstrate``:
  through ``app.install_substrate()`` on functualize 0.4 (where
  ``app.substrate`` became read-only, so the seed's own plugin silently
  falls back to JSON files there), through ``app.substrate = ...`` on 0.3.
  The database is ``plugin.sqlite-state.db_path`` from the app's
  configuration, else ``<app.fresh_root>/.functualize/state.db``. A failure
  to open or install raises functualize's ``SubstrateInstallError`` where
  functualize has one (0.4: it aborts the boot rather than split a
  project's documents across two backends); on 0.3 it is logged and the app
  keeps its filesystem default, as the seed does. Nothing from functualize
  is imported until the plugin is called.

Which functualize versions work: 0.3.x and 0.4.x, tested in durastate's
suite with functualize 0.3.0 and 0.4.0 (functualize-state-sqlite 0.3.0's
own ``tests/test_sqlite_substrate.py``, 23 of 23 on an SQLite file and on
PostgreSQL, and the plugin booted in a real ``FunctualizeApp``; see
``tests/test_functualize_upstream.py``).

Where this differs from the seed (none of it can change a correct caller's
results):

* Payloads are stored as compact JSON (the seed: ``indent=2,
  sort_keys=True`` text), so ``describe`` sizes are bytes of the compact
  form, and key order inside a document is kept as written.
* Refused before anything is written, instead of being stored: NaN and
  infinities (``ValueError``; the seed wrote the non-JSON token ``NaN``),
  non-``str`` dict keys (``TypeError``; the seed silently turned ``1`` into
  ``"1"``), lone surrogates in strings or keys (``ValueError``), integers
  outside 64 bits (``ValueError``), nesting deeper than 255 (``ValueError``),
  a payload that is not a dict (``TypeError``), keys that are not ``str``
  (``TypeError``), contain NUL or are longer than 2048 UTF-8 bytes
  (``ValueError``). Unserialisable values raise ``TypeError``, as in the
  seed. Every ``ValueError`` here is a ``durastate.InvalidRequest``.
* ``expect`` must be an integer (``operator.index``) or ``None``
  (``TypeError`` otherwise); the seed handed any object to SQLite, where
  ``"1"`` and ``1.0`` happened to match revision 1.
* ``describe`` of a ``/``-ending key counts the keys that start with it,
  exactly. The seed matched ``LIKE '<key>%'``, where ``%`` and ``_`` in the
  key are wildcards and ASCII letters match either case (``"a_/"`` counted
  ``"ab/x"``, ``"a/"`` counted ``"A/x"``): the one count here that differs
  for such keys is the one the seed got wrong.
* ``clear`` is atomic (copy and removal in one transaction); the seed ran
  three separate statements, so a crash between them could leave both.
* A payload written by the seed with ``NaN`` in it is unreadable here
  (``SubstrateUnreadableError``): strict JSON has no ``NaN``. ``clear`` moves
  it aside as usual.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import operator
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import durastate

from ..documents import Documents, UnreadableDocument, check_key, encode_document
from ..errors import Conflict

__all__ = ["SQLiteStatePlugin", "SQLiteSubstrate", "Stored", "SubstrateUnreadableError"]

logger = logging.getLogger(__name__)

#: The database's file name when nothing configures one (seed: DEFAULT_DB_NAME).
DEFAULT_DB_NAME = "state.db"

_URL_PREFIXES = ("sqlite:", "postgresql://", "postgres://", "citus://")
_MEMORY = ("memory:", ":memory:")


@dataclass(frozen=True, slots=True)
class Stored:
    """A document as read: its data and its revision (an opaque token to compare)."""

    data: dict[str, Any]
    revision: int


class SubstrateUnreadableError(Exception):
    """A stored document cannot be decoded into a JSON object.

    ``key`` names the document, ``reason`` says what was wrong. ``clear(key)``
    moves it aside.
    """

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"cannot read {key!r}: {reason}")
        self.key = key
        self.reason = reason


_bridged: type[SubstrateUnreadableError] | None = None


def _takes_key_and_detail(init: Any) -> bool:
    """Whether an exception's ``__init__`` takes ``(key, detail)`` rather than one message.

    functualize 0.3.x and 0.4.x define ``SubstrateUnreadableError(key,
    detail)``; a version whose class takes a single message (or defines no
    ``__init__`` of its own) gets the message.
    """
    if init is Exception.__init__:
        return False
    try:
        parameters = list(inspect.signature(init).parameters.values())[1:]  # after self
    except (TypeError, ValueError):
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2


def _unreadable_type() -> type[SubstrateUnreadableError]:
    """Our error class, made also functualize's own when functualize is importable.

    The combined class is built once. Its ``__init__`` constructs the
    functualize half with the signature the installed functualize has, then
    sets our ``key`` and ``reason``; the message is functualize's.
    """
    global _bridged
    if _bridged is None:
        bridged: type[SubstrateUnreadableError] = SubstrateUnreadableError
        try:
            theirs = importlib.import_module("functualize._types.errors").SubstrateUnreadableError
        except Exception:
            pass
        else:
            key_and_detail = _takes_key_and_detail(theirs.__init__)

            def __init__(self: SubstrateUnreadableError, key: str, reason: str) -> None:
                if key_and_detail:
                    theirs.__init__(self, key, reason)
                else:
                    theirs.__init__(self, f"cannot read {key!r}: {reason}")
                self.key = key
                self.reason = reason

            try:
                bridged = type(
                    "SubstrateUnreadableError",
                    (SubstrateUnreadableError, theirs),
                    {"__init__": __init__, "__module__": __name__},
                )
            except TypeError:  # an incompatible layout: ours alone
                pass
        _bridged = bridged
    return _bridged


def _open_target(path: str | os.PathLike[str]) -> tuple[str | os.PathLike[str], Path | str | None]:
    """What to give ``durastate.open`` and the file path it names (if any)."""
    if isinstance(path, str) and (path.startswith(_URL_PREFIXES) or path in _MEMORY):
        if path.startswith("sqlite:") and path not in ("sqlite::memory:",):
            rest = path[len("sqlite://") :] if path.startswith("sqlite://") else path[len("sqlite:") :]
            if rest and rest != ":memory:":
                file_path = Path(rest)
                file_path.parent.mkdir(parents=True, exist_ok=True)
                return path, file_path
        return path, None
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    file_path = Path(path)
    file_path.parent.mkdir(parents=True, exist_ok=True)
    return file_path, file_path


class SQLiteSubstrate:
    """Documents in one durastate store, reachable from any process (see the module docstring)."""

    __slots__ = ("_docs", "_path", "_read_as", "_store")

    def __init__(self, path: Path | str) -> None:
        target, file_path = _open_target(path)
        self._store = durastate.open(target)
        self._docs: Documents = self._store.documents
        self._read_as = self._docs.read_as  # bound once: read is the hottest call
        self._path: Path | str = file_path if file_path is not None else self._store.url

    @property
    def path(self) -> Path | str:
        """The database file (a ``Path``), or the store URL for targets that are not files."""
        return self._path

    @property
    def store(self) -> durastate.Store:
        """The durastate store underneath (its other facets share the database)."""
        return self._store

    # -- the port ---------------------------------------------------------------

    def read(self, key: str) -> Stored | None:
        try:
            return self._read_as(key, Stored)
        except UnreadableDocument as exc:
            raise _unreadable_type()(key, exc.reason) from None

    def write(self, key: str, payload: dict[str, Any], *, expect: int | None = None) -> bool:
        """Replace the document; ``False`` when ``expect`` no longer matches.

        The compare and the write are one statement: exact without a lock.
        """
        if expect is None:
            self._docs.write(key, payload)
            return True
        try:
            expected = operator.index(expect)
        except TypeError:
            raise TypeError(f"expect must be an int revision or None, got {type(expect).__name__}") from None
        if expected < 1 or expected >= 2**63:
            # No document is ever at such a revision (they start at 1): the
            # seed's UPDATE matched nothing. Validate as a write would.
            check_key(key)
            encode_document(payload, self._docs.max_value_size)
            return False
        try:
            self._docs.write(key, payload, expect=expected)
        except Conflict:
            return False
        return True

    @contextmanager
    def lock(self, *keys: str) -> Iterator[None]:
        """ONE lock, covering every key; re-entrant per thread."""
        with self._docs.lock(*keys):
            yield

    def clear(self, key: str) -> str | None:
        """Move the document, undecoded, to a backup key; ``"<path>#<backup>"`` or ``None``."""
        backup = self._docs.clear(key)
        if backup is None:
            return None
        return f"{self._path}#{backup}"

    def delete(self, key: str) -> bool:
        return self._docs.delete(key)

    def describe(self, key: str) -> str:
        """The database, the key and the payload size; a ``/``-ending key in aggregate."""
        if isinstance(key, str) and key.endswith("/"):
            info = self._docs.describe(prefix=key)
            if not info.count:
                return "empty"
            plural = "" if info.count == 1 else "s"
            return f"{info.count} document{plural}, {info.size} B in {self._path}"
        one = self._docs.describe(key)
        if one is None:
            return f"{self._path}#{key} (absent)"
        return f"{self._path}#{key} ({one.size} B)"

    # -- beyond the seed -----------------------------------------------------------

    def close(self) -> None:
        """Close the store's connections (the seed had no close; optional)."""
        self._store.close()

    def __enter__(self) -> SQLiteSubstrate:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<SQLiteSubstrate {self._path}>"


def _functualize_install_error() -> type[Exception] | None:
    """functualize's ``SubstrateInstallError`` (0.4 and later), or ``None``."""
    try:
        error = importlib.import_module("functualize._types.errors").SubstrateInstallError
    except Exception:
        return None
    return error if isinstance(error, type) and issubclass(error, Exception) else None


class SQLiteStatePlugin:
    """Installs a :class:`SQLiteSubstrate` as the app's substrate at ``APP_READY``."""

    name: str = "sqlite-state"
    version: str = "0.2.0"
    description: str = "Keeps this project's runtime state in SQLite"

    def __init__(self) -> None:
        self._substrate: SQLiteSubstrate | None = None

    @property
    def substrate(self) -> SQLiteSubstrate | None:
        """The substrate this plugin installed, or ``None`` before ``APP_READY``."""
        return self._substrate

    def __call__(self, app: Any) -> None:
        hooks = importlib.import_module("functualize._events.hooks")
        app.hook_registry.register_global(hooks.HookEvent.APP_READY, self._on_app_ready)

    def _on_app_ready(self, app: Any) -> None:
        """Choose the substrate once, before any store resolved one.

        functualize 0.4 installs through ``app.install_substrate()`` (its
        ``app.substrate`` is read-only); 0.3 through ``app.substrate = ...``.
        Opening or installing can fail (an unwritable folder, a server that
        is down, an app that already resolved its substrate and refuses a
        late one). Where functualize defines ``SubstrateInstallError`` (0.4),
        that is raised, which aborts the boot as functualize asks of
        substrate plugins, rather than splitting a project's documents
        between two backends; on older versions it is logged and the app
        keeps its filesystem default, as the seed does.
        """
        substrate: SQLiteSubstrate | None = None
        try:
            substrate = SQLiteSubstrate(self._db_path(app))
            install = getattr(app, "install_substrate", None)
            if callable(install):
                install(substrate)  # functualize >= 0.4: the boot-only install door
            else:
                app.substrate = substrate  # functualize 0.3: a settable attribute
        except Exception as exc:
            if substrate is not None:
                substrate.close()
            refusal = _functualize_install_error()
            if refusal is not None:
                raise refusal(f"sqlite-state could not install its substrate: {exc}") from exc
            logger.exception(
                "sqlite-state could not install its substrate; this project will use the filesystem default"
            )
            return
        self._substrate = substrate
        logger.debug("sqlite-state installed a substrate at %s", substrate.path)

    def _db_path(self, app: Any) -> Path | str:
        """``plugin.sqlite-state.db_path`` if configured, else ``<fresh_root>/.functualize/state.db``.

        From ``fresh_root``, not the working directory, so a later ``chdir``
        cannot move a run's database.
        """
        configured = self._configured_path(app)
        if configured:
            if configured.startswith(_URL_PREFIXES) or configured in _MEMORY:
                return configured
            return Path(configured)
        return Path(app.fresh_root) / ".functualize" / DEFAULT_DB_NAME

    @staticmethod
    def _configured_path(app: Any) -> str | None:
        """The configured ``db_path`` (a path or a durastate URL), or ``None``."""
        try:
            # functualize's configuration resolves sections into pydantic
            # models (pydantic comes with functualize, not with durastate).
            pydantic = importlib.import_module("pydantic")
            model = pydantic.create_model(
                "_SqliteConfig",
                db_path=(str | None, pydantic.Field(default=None, description="Where this project's state lives.")),
            )
            resolved = app.configuration.resolve_model("plugin.sqlite-state", model)
            value = resolved.db_path
        except Exception:
            return None
        return value if isinstance(value, str) else None
