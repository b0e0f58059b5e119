"""OpenAI Agents SDK sessions on durastate: ``DurastateSession``.

A drop-in for the SDK's ``SQLiteSession`` (``openai-agents`` 0.24) on any
durastate URL, so conversation history survives the process and can live in
one SQLite file shared by several processes or on PostgreSQL::

    from agents import Agent, Runner
    from durastate.integrations.openai_agents import DurastateSession

    session = DurastateSession("user-42", url="sqlite:agents.db")
    result = await Runner.run(agent, "hello", session=session)

Install with ``pip install 'durastate[openai-agents]'``; importing this
module without the SDK raises ``ImportError`` naming that extra.

It subclasses the SDK's ``SessionABC`` (so it also satisfies the ``Session``
protocol): ``session_id``, ``session_settings`` and the async
``get_items(limit)``, ``add_items(items)``, ``pop_item()`` and
``clear_session()``, with ``SQLiteSession``'s results for every sequence of
calls (a differential test checks that against the SDK's own class).

Storage: the kv facet. Items of a session are values in scope
``b"openai-agents"``, namespace = the session id (UTF-8), key = the item's
ordinal as 8 big-endian bytes, value = the item as compact JSON. A counter at
the same address (key ``b"last"``) holds the last ordinal handed out. kv
rather than a log because ``pop_item`` removes the newest item (logs are
append-only) and ``get_items(limit)`` wants the newest N, which a reverse key
scan reads from the index in one statement; records and documents would add
nothing here but weight (no revisions, no cross-entity batches needed).

Ordering and concurrency (several tasks, threads or processes on one
session):

* ``add_items`` is one transaction: add ``len(items)`` to the counter, then
  write the items under the ordinals it returned. The counter serialises
  adders (SQLite's single writer, taken up front with ``BEGIN IMMEDIATE`` and
  waited for up to the store's ``busy_timeout``, which is 30 s by default;
  PostgreSQL's row lock on the counter, held to commit), so ordinals follow
  commit order: a batch stays contiguous, is never interleaved with another,
  and a reader sees all of it or none of it.
* The counter is never reset, not even by ``clear_session``, so an ordinal
  is never handed out twice and an item written after a clear can never sort
  before one written before it.
* ``pop_item`` removes the newest item and returns it in one statement
  (``kv.take_last``, as ``SQLiteSession``'s ``DELETE ... RETURNING``): two
  pops never return the same item, and a pop racing another takes the next
  newest rather than coming back empty.
* ``get_items`` reads one snapshot without the write lock: one statement
  for a limit of up to a scan page (512), a read transaction otherwise.

Where it follows ``SQLiteSession`` exactly: ``limit=None`` falls back to
``session_settings.limit``; ``limit=0`` returns ``[]`` and a negative limit
returns every item (the SDK keeps SQLite's ``LIMIT -1``); items come back as
a JSON round trip (tuples as lists); an empty ``add_items`` writes nothing;
``pop_item`` on an empty session returns ``None``.

Refused (``durastate.InvalidRequest``, nothing written) where ``SQLiteSession``
would raise ``TypeError`` or store something JSON cannot read back: a
``session_id`` that is not a ``str`` (or is too long for ``max_key_size``),
``items`` that are not a list of JSON values (non-str keys, NaN, integers past
64 bits), a ``limit`` that is not an int, ``session_settings`` the SDK refuses. After ``close()`` every call raises
``durastate.StoreClosed`` (``SQLiteSession`` raises ``RuntimeError``).

Async: every coroutine runs the synchronous implementation (the methods
``_get_items`` ... ``_clear_session``) through the session's ``AsyncCalls``
(``durastate.integrations._common``): a ``durastate.aio.AsyncStore`` over
the session's store (owned or borrowed) with a runner of the session's own.
On a SQLite file a call runs inline on the event loop's thread, no thread
hop, and moves to a worker thread only when another connection holds the
write lock (the loop never waits for it); on PostgreSQL it runs on a worker.
Each method is safe to run inline: ``add_items`` is one transaction,
``pop_item`` and ``clear_session`` are one statement each. A mutation (``add_items``, ``pop_item``,
``clear_session``) whose caller is cancelled is carried to its end before
the cancellation is raised, as the SDK's own sessions do (their
``_await_mutation``): a cancelled ``add_items`` has written its whole batch
or nothing, nothing of it is still running when ``CancelledError`` arrives,
and the caller can tell which by reading. ``close()`` (or ``await
aclose()``, which does not block the loop) waits for calls still on worker
threads.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import orjson

from .. import store as _store
from .._json import dump_json
from .._validate import as_list, fail
from ..errors import StoreClosed
from ..kv import PAGE_SIZE
from ._common import StoreHolder, to_the_end

try:
    from agents.items import TResponseInputItem
    from agents.memory import SessionABC, SessionSettings
    from agents.memory.session_settings import coerce_session_settings, resolve_session_limit
except ImportError as exc:  # pragma: no cover - exercised by a subprocess test
    raise ImportError(
        "durastate.integrations.openai_agents needs the OpenAI Agents SDK: pip install 'durastate[openai-agents]'"
    ) from exc

__all__ = ["DurastateSession", "SCOPE"]

SCOPE = b"openai-agents"
LAST_ORDINAL_KEY = b"last"  # the counter; value keys are 8 bytes, so they never meet it


def _ordinal_key(ordinal: int) -> bytes:
    # Big-endian so that keys sort (as unsigned bytes) in ordinal order.
    return ordinal.to_bytes(8, "big")


class DurastateSession(StoreHolder, SessionABC):
    """Conversation history of one session, on a durastate store.

    ``DurastateSession(session_id, url=...)`` opens (and on ``close()``
    closes) its own store; ``store=`` uses one you opened (shared by many
    sessions: one set of connections for all; ``close()`` leaves it open).
    With neither, the default store ``./.durastate/state.db`` is opened.
    ``session_settings`` (a ``SessionSettings`` or a dict) sets the default
    ``limit`` of ``get_items``. Thread- and task-safe; usable from several
    processes at once (see the module docstring for the ordering rules).
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        *,
        url: str | None = None,
        store: _store.Store | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        if not isinstance(session_id, str):
            fail(f"session_id must be a str, got {type(session_id).__name__}")
        try:
            ns = session_id.encode("utf-8")
        except UnicodeEncodeError:
            fail(f"session_id must be valid unicode (no lone surrogates), got {session_id!r}")
        try:
            settings = SessionSettings() if session_settings is None else coerce_session_settings(session_settings)
        except (TypeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
            fail(f"session_settings must be a SessionSettings or a dict of its fields: {exc}")
        super().__init__(url, store, name="durastate-openai-agents")
        room = self.store.kv.max_key_size - len(SCOPE) - 8
        if len(ns) > room:
            super().close()
            fail(f"session_id is {len(ns)} bytes as UTF-8; with this store's max_key_size it may be at most {room}")
        self.session_id = session_id
        self.session_settings = settings
        self._ns = ns
        self._closed = False

    # -- the SDK's Session protocol ------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The history in chronological order; the newest ``limit`` items when given.

        ``limit=None`` uses ``session_settings.limit`` (``None``: all items).
        """
        return await self._aio.read(self._get_items, limit)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` (in order, atomically) after the newest item."""
        await to_the_end(self._aio.call(self._add_items, items))

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item; ``None`` when the session is empty."""
        return await to_the_end(self._aio.call(self._pop_item))

    async def clear_session(self) -> None:
        """Remove every item of this session (other sessions are untouched)."""
        await to_the_end(self._aio.call(self._clear_session))

    # -- lifecycle -------------------------------------------------------------

    def __repr__(self) -> str:
        return f"<DurastateSession {self.session_id!r} on {self.store.url}{' (closed)' if self._closed else ''}>"

    # -- the synchronous implementation ----------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed(f"DurastateSession {self.session_id!r} is closed")

    def _get_items(self, limit: int | None) -> list[TResponseInputItem]:
        self._check_open()
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            fail(f"limit must be an int or None, got {type(limit).__name__}")
        wanted = resolve_session_limit(limit, self.session_settings)
        if wanted == 0:
            return []
        # The newest `wanted` items read backwards; None or negative: all, forwards.
        newest = wanted if wanted is not None and wanted > 0 else None
        # A scan of at most one page is one statement, a snapshot already;
        # a longer one reads its pages in one read transaction.
        pages = nullcontext() if newest is not None and newest <= PAGE_SIZE else self.store.engine.read_transaction()
        with pages:
            rows = list(self.store.kv.scan(SCOPE, self._ns, reverse=newest is not None, limit=newest))
        if newest is not None:
            rows.reverse()
        return [orjson.loads(data) for _, data in rows]

    def _add_items(self, items: list[TResponseInputItem]) -> None:
        self._check_open()
        encoded = [dump_json(f"items[{i}]", item) for i, item in enumerate(as_list("items", items))]
        if not encoded:
            return
        kv = self.store.kv
        with self.store.transaction():
            last = kv.incr(SCOPE, self._ns, LAST_ORDINAL_KEY, len(encoded))
            first = last - len(encoded) + 1
            kv.put_many(SCOPE, self._ns, [(_ordinal_key(first + i), data) for i, data in enumerate(encoded)])

    def _pop_item(self) -> TResponseInputItem | None:
        self._check_open()
        newest = self.store.kv.take_last(SCOPE, self._ns)
        if newest is None:
            return None
        item: TResponseInputItem = orjson.loads(newest[1])
        return item

    def _clear_session(self) -> None:
        self._check_open()
        self.store.kv.delete(SCOPE, self._ns, all=True)
