"""Agent Framework conversation history on durastate: ``DurastateHistoryProvider``.

A ``HistoryProvider`` (``agent-framework-core`` 1.26) whose ``get_messages``
and ``save_messages`` keep each session's messages in a durastate store, so
an agent's conversation survives the process and can be shared by several
processes (one SQLite file) or hosts (PostgreSQL)::

    from agent_framework import Agent
    from durastate.integrations.agent_framework import DurastateHistoryProvider

    history = DurastateHistoryProvider(url="sqlite:agents.db")
    agent = Agent(client=client, context_providers=[history])

It behaves as the framework's ``FileHistoryProvider`` (one append-only JSON
Lines file per session; a differential test checks every sequence of calls
against it): ``save_messages`` appends the messages that are not already
stored, by the framework's own rule (``filter_new_messages``: a replayed
transcript or an overlap with the stored tail is not stored twice, a
repeated user input without an id is); ``get_messages`` returns the
session's messages in order, without those marked
``additional_properties["_excluded"]`` when ``skip_excluded=True``;
``session_id=None`` (or ``""``) is the session ``"default"``, as the file
provider names its file; ``state`` is not used. ``load_messages``,
``store_inputs``, ``store_outputs``, ``store_context_messages`` and
``store_context_from`` are the base class's options, unchanged.

Storage: the kv facet, scope ``b"agent-framework/history"``, namespace = the
session id (UTF-8), key = the message's ordinal as 8 big-endian bytes, value
= ``Message.to_dict()`` as compact JSON (what the file provider writes as a
line). A counter at key ``b"last"`` holds the last ordinal handed out. kv
for the same reasons as the OpenAI Agents session: ordered keys per session,
the newest N read backwards off the primary key, no revisions needed.

Concurrency, where the file provider has a per-process lock only (two
processes appending to one file can each miss the other's messages in their
duplicate check, or interleave): ``save_messages`` is one transaction that
first takes a lock on the session (``engine.lock``: SQLite's single writer,
a PostgreSQL advisory lock), then reads the stored tail it compares with
(at most as many messages as it is given: the framework's rule never looks
further back), then appends; so concurrent savers of one session are
serialised, each sees the other's messages, nothing is lost or stored twice
by a race. Savers of different sessions only contend on SQLite's one writer.

Refused (``durastate.InvalidRequest``, nothing written): a ``session_id``
that is not a ``str`` or ``None``, or too long for ``max_key_size``;
``messages`` that are not ``Message`` objects; a message whose ``to_dict()``
is not JSON (NaN, integers past 64 bits: the file provider writes NaN as
Python's non-standard token).

Async: ``get_messages`` and ``save_messages`` run their synchronous twins
through the provider's ``AsyncCalls`` (``durastate.integrations._common``);
``save_messages`` is one transaction of its own (so safe to run inline on
SQLite), carried to its end if its caller is cancelled.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import orjson
from agent_framework import HistoryProvider, Message
from agent_framework._sessions import filter_new_messages

from ... import store as _store
from ..._json import dump_json
from ..._validate import as_list, fail, fail_type
from ...errors import StoreClosed
from ...kv import PAGE_SIZE
from .._common import StoreHolder, to_the_end

__all__ = ["SCOPE", "DurastateHistoryProvider"]

SCOPE = b"agent-framework/history"
LAST_ORDINAL_KEY = b"last"  # a counter (counters are not values: scans never meet it)


def _ordinal_key(ordinal: int) -> bytes:
    return ordinal.to_bytes(8, "big")


class DurastateHistoryProvider(StoreHolder, HistoryProvider):
    """Agent Framework ``HistoryProvider`` on a durastate store (see the module docstring).

    ``url`` opens (and ``close()`` closes) a store; ``store=`` borrows one;
    neither opens the default store. The other arguments are
    ``FileHistoryProvider``'s (without its file options).
    """

    DEFAULT_SOURCE_ID: ClassVar[str] = "durastate_history"
    DEFAULT_SESSION_ID: ClassVar[str] = "default"

    def __init__(
        self,
        url: str | None = None,
        *,
        store: _store.Store | None = None,
        source_id: str = DEFAULT_SOURCE_ID,
        load_messages: bool = True,
        store_inputs: bool = True,
        store_context_messages: bool = False,
        store_context_from: set[str] | None = None,
        store_outputs: bool = True,
        skip_excluded: bool = False,
    ) -> None:
        if not isinstance(source_id, str) or not source_id:
            fail(f"source_id must be a non-empty str, got {source_id!r}")
        for name, flag in (
            ("load_messages", load_messages),
            ("store_inputs", store_inputs),
            ("store_context_messages", store_context_messages),
            ("store_outputs", store_outputs),
            ("skip_excluded", skip_excluded),
        ):
            if not isinstance(flag, bool):
                fail_type(name, "a bool", flag)
        if store_context_from is not None and (
            not isinstance(store_context_from, (set, frozenset))
            or not all(isinstance(s, str) for s in store_context_from)
        ):
            fail_type("store_context_from", "a set of str or None", store_context_from)
        HistoryProvider.__init__(
            self,
            source_id,
            load_messages=load_messages,
            store_inputs=store_inputs,
            store_context_messages=store_context_messages,
            store_context_from=store_context_from,
            store_outputs=store_outputs,
        )
        StoreHolder.__init__(self, url, store, name="durastate-agent-framework-history")
        self.skip_excluded = skip_excluded
        self._closed = False

    # -- the framework's HistoryProvider ------------------------------------------

    async def get_messages(
        self, session_id: str | None, *, state: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Message]:
        """The session's stored messages, oldest first."""
        return await self._aio.read(self._get_messages, session_id)

    async def save_messages(
        self,
        session_id: str | None,
        messages: Sequence[Message],
        *,
        state: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Append the messages not already stored (the framework's overlap rule), atomically."""
        await to_the_end(self._aio.call(self._save_messages, session_id, messages))

    async def clear(self, session_id: str | None) -> int:
        """Remove every stored message of the session (not in the framework's protocol); how many there were.

        Ordinals are never reused: messages saved later sort after any saved before.
        """
        return await to_the_end(self._aio.call(self._clear, session_id))

    # -- lifecycle -------------------------------------------------------------

    def __repr__(self) -> str:
        return f"<DurastateHistoryProvider {self.source_id!r} on {self.store.url}{' (closed)' if self._closed else ''}>"

    # -- the synchronous implementation ----------------------------------------

    def _namespace(self, session_id: Any) -> bytes:
        if self._closed:
            raise StoreClosed(f"DurastateHistoryProvider {self.source_id!r} is closed")
        if session_id is not None and not isinstance(session_id, str):
            fail_type("session_id", "a str or None", session_id)
        try:
            ns = (session_id or self.DEFAULT_SESSION_ID).encode("utf-8")
        except UnicodeEncodeError:
            fail(f"session_id must be valid unicode (no lone surrogates), got {session_id!r}")
        room = self.store.kv.max_key_size - len(SCOPE) - 8
        if len(ns) > room:
            fail(f"session_id is {len(ns)} bytes as UTF-8; with this store's max_key_size it may be at most {room}")
        return ns

    def _get_messages(self, session_id: str | None) -> list[Message]:
        ns = self._namespace(session_id)
        kv = self.store.kv
        # Up to a page: one statement, a snapshot already. Longer: read again, every page in one snapshot.
        rows = list(kv.scan(SCOPE, ns, limit=PAGE_SIZE + 1))
        if len(rows) > PAGE_SIZE:
            with self.store.engine.read_transaction():
                rows = list(kv.scan(SCOPE, ns))
        messages = [Message.from_dict(orjson.loads(data)) for _, data in rows]
        if self.skip_excluded:
            messages = [m for m in messages if not m.additional_properties.get("_excluded", False)]
        return messages

    def _clear(self, session_id: str | None) -> int:
        ns = self._namespace(session_id)
        return self.store.kv.delete(SCOPE, ns, all=True)

    def _save_messages(self, session_id: str | None, messages: Sequence[Message]) -> None:
        ns = self._namespace(session_id)
        incoming = as_list("messages", messages)
        for i, message in enumerate(incoming):
            if not isinstance(message, Message):
                fail_type(f"messages[{i}]", "an agent_framework.Message", message)
        if not incoming:
            return
        encoded = {id(m): dump_json("message", m.to_dict(), self.store.kv.max_value_size) for m in incoming}
        kv = self.store.kv
        with self.store.transaction():
            # Savers of one session run one at a time from here to the commit.
            self.store.engine.lock(f"durastate-agent-framework-history:{ns.hex()}")
            # The framework's rule compares the incoming messages with at most as many stored ones.
            tail = list(kv.scan(SCOPE, ns, reverse=True, limit=len(incoming)))
            tail.reverse()
            new = filter_new_messages([Message.from_dict(orjson.loads(data)) for _, data in tail], incoming)
            if not new:
                return
            last = kv.incr(SCOPE, ns, LAST_ORDINAL_KEY, len(new))
            first = last - len(new) + 1
            kv.put_many(SCOPE, ns, [(_ordinal_key(first + i), encoded[id(m)]) for i, m in enumerate(new)])
