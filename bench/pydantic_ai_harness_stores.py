"""pydantic-ai-harness stores on durastate vs the harness's own SQL backends, side by side.

    .venv/bin/python bench/pydantic_ai_harness_stores.py [--rounds 7] [--calls 200] [--postgres-url URL]

(Not ``bench/pydantic_ai_harness.py``: a script named after the package shadows it when run.)

Contenders, each on a fresh database in one temporary folder, driven through
the harness's async ``MemoryStore`` / ``StepStore`` methods from one event loop:

* ``durastate``: ``DurastateMemoryStore`` and ``DurastateStepStore`` on one
  SQLite file opened with ``durability="full"`` (WAL, an fsync per commit);
* ``harness``: the harness's ``SqliteMemoryStore`` and ``SqliteStepStore``
  (``database=``: a connection per call, WAL, SQLite's default
  ``synchronous=FULL``, so an fsync per commit too: the same durability;
  ``SqliteStepStore``'s default ``media_store='auto'``, a ``SqliteMediaStore``
  on the same file).

With ``--postgres-url`` (each in a fresh schema; the server's
``synchronous_commit``, ``on`` by default, for both: a returned commit is on
disk): ``DurastateMemoryStore`` against the harness's ``PostgresMemoryStore``
twice: on an asyncpg pool (the driver it is written for; skipped, and said
so, when asyncpg is not installed: it is no durastate dependency) and on one
psycopg 3 connection with ``AsyncRawCursor`` (which takes asyncpg's ``$1``
placeholders; psycopg is durastate's driver, so this peer shows what the
driver accounts for). The 0.36.0 wheel has no PostgreSQL step store (only
``MongoStepStore``), so on PostgreSQL the step ops of ``DurastateStepStore``
are raced against the harness's ``SqliteStepStore`` as above: a reference
for what the move to a server costs, not a like-for-like race.

Ops, the calls the harness's capabilities make:

* ``write_memory``: what the ``write_memory`` tool does to store a file that
  exists: ``get_operation`` (no receipt), ``read``, ``write`` with the read
  version as ``expected_version`` and a fresh ``MemoryOperation`` (a ~1 KB
  file, rewritten each call); ``read`` of a ~1 KB file; ``list_paths`` of a
  50-file prefix.
* ``run start``: what ``StepPersistence.before_run`` does: ``get_run`` (none),
  ``register_run`` (a new run id), ``append_event`` (``run_started`` with an
  idempotency key); ``tool effect``: ``before_tool_execute`` and
  ``after_tool_execute``'s ledger calls (``record_tool_effect`` started,
  ``get_tool_effect``, ``record_tool_effect`` completed); ``append_event``
  (a keyed ``tool_call_started`` event); ``save_snapshot`` of a 12-message
  history (~3 KB of JSON, keyed as the capability keys it);
  ``latest_snapshot`` of a run holding 20 snapshots; the same save and read
  with a 100 KiB image in the history (above the 64 KiB media threshold:
  offloaded to each side's default media store, durastate's in the
  snapshot's transaction, the harness's ``SqliteMediaStore`` on a connection
  of its own; the same image every save, so stored once); ``list_events``
  of a 50-event run.

Method: one untimed warm-up round, then ``--rounds`` rounds; in each round
every op runs ``--calls`` times per contender, back to back, in an order
that alternates from round to round. Reported, in wall time and in the
process's CPU time (all threads: the harness's SQLite stores run on anyio's
worker threads, durastate on its own): median time per call, and per peer
the median of the per-round ratios peer / durastate (> 1: durastate faster)
with their range. The machine is shared and noisy: read ratios.
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai_harness.memory import MemoryOperation, PostgresMemoryStore, SqliteMemoryStore
from pydantic_ai_harness.step_persistence import (
    ContinuableSnapshot,
    RunRecord,
    SqliteStepStore,
    StepEvent,
    ToolEffectRecord,
)

import durastate
from _race import arace, arguments, postgres_schema
from durastate.integrations.pydantic_ai_harness import DurastateMemoryStore, DurastateStepStore

Ops = dict[str, Callable[[], Awaitable[Any]]]
FILES = 50  # files under the listed prefix
EVENTS = 50  # events of the listed run
SNAPSHOTS = 20  # snapshots of the run whose latest is read
IMAGE = bytes(range(256)) * 400  # 100 KiB: above the step stores' 64 KiB media threshold
BODY = "Remember: the user prefers short answers; the build runs on two cores. " * 14  # ~1 KB


def _history() -> list[ModelMessage]:
    """A 12-message run: a prompt, five tool cycles, an answer (~3 KB as JSON)."""
    messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("Find where the retry budget is spent " * 4)])]
    for n in range(5):
        call = ToolCallPart(tool_name="grep", args={"pattern": f"retry_{n}", "path": "src/"}, tool_call_id=f"c{n}")
        messages.append(ModelResponse(parts=[TextPart(f"Looking at step {n}."), call]))
        result = ToolReturnPart(
            tool_name="grep", content=f"src/retry.py:{n * 10}: budget -= cost " * 5, tool_call_id=f"c{n}"
        )
        messages.append(ModelRequest(parts=[result]))
    messages.append(ModelResponse(parts=[TextPart("The budget is spent in src/retry.py. " * 3)]))
    return messages


def _event(run_id: str, n: int, kind: Any = "tool_call_started") -> StepEvent:
    return StepEvent(
        run_id=run_id, kind=kind, step_index=n, timestamp=datetime.now(UTC), conversation_id="conv",
        agent_name="bench", tool_call_id=f"c{n}", tool_name="grep", metadata={"team": "core"},
        idempotency_key=f"{n}:{n}:{kind}:c{n}",
    )  # fmt: skip


def _snapshot(run_id: str, n: int, messages: list[ModelMessage]) -> ContinuableSnapshot:
    return ContinuableSnapshot(
        run_id=run_id, step_index=n, messages=messages, conversation_id="conv", agent_name="bench",
        timestamp=datetime.now(UTC), state="complete", idempotency_key=f"{n}:{n}:complete",
    )  # fmt: skip


async def memory_ops(memory: Any) -> Ops:
    """The memory ops on ``memory`` (a harness ``MemoryStore``), after writing what they read."""
    counter = itertools.count()
    for n in range(FILES):
        await memory.write(f"notes/listed/f{n:03}.md", BODY, expected_version=None)
    await memory.write("notes/MEMORY.md", BODY, expected_version=None)

    async def write_memory() -> None:
        n = next(counter)
        operation = MemoryOperation(id=f"op-{n}", fingerprint=f"fp-{n}")
        assert await memory.get_operation(operation) is None
        current = await memory.read("notes/MEMORY.md", max_chars=10_000)
        await memory.write(
            "notes/MEMORY.md", BODY[:-8] + f"{n:08}", expected_version=current.version, operation=operation
        )

    async def read() -> None:
        assert (await memory.read("notes/listed/f007.md", max_chars=10_000)) is not None

    async def list_paths() -> None:
        assert len(await memory.list_paths("notes/listed/", limit=100)) == FILES

    return {
        "write_memory (get_operation, read, write)": write_memory,
        "memory read": read,
        f"list_paths ({FILES})": list_paths,
    }


async def step_ops(steps: Any) -> Ops:
    """The step-store ops on ``steps`` (a harness ``StepStore``), after storing what they read."""
    counter = itertools.count()
    history = _history()
    pictured = [ModelRequest(parts=[UserPromptPart(["What is this?", BinaryContent(IMAGE, media_type="image/png")])])]
    pictured += history
    await steps.register_run(RunRecord(run_id="hot", conversation_id="conv", agent_name="bench"))
    await steps.register_run(RunRecord(run_id="read", conversation_id="conv", agent_name="bench"))
    for n in range(EVENTS):
        await steps.append_event(_event("read", n))
    for n in range(SNAPSHOTS):
        await steps.save_snapshot(_snapshot("read", n, history))
    await steps.save_snapshot(_snapshot("pictured", 0, pictured))

    async def run_start() -> None:
        run_id = f"run-{next(counter)}"
        assert await steps.get_run(run_id=run_id) is None
        await steps.register_run(
            RunRecord(run_id=run_id, conversation_id="conv", agent_name="bench", registration_id=run_id)
        )
        await steps.append_event(_event(run_id, 0, "run_started"))

    async def tool_effect() -> None:
        call = f"call-{next(counter)}"
        started = ToolEffectRecord(run_id="hot", tool_call_id=call, tool_name="grep", status="started")
        await steps.record_tool_effect(started)
        prior = await steps.get_tool_effect(run_id="hot", tool_call_id=call)
        done = ToolEffectRecord(
            run_id="hot", tool_call_id=call, tool_name="grep", status="completed",
            started_at=prior.started_at, ended_at=datetime.now(UTC),
        )  # fmt: skip
        await steps.record_tool_effect(done)

    async def append() -> None:
        await steps.append_event(_event("hot", next(counter)))

    async def save() -> None:
        await steps.save_snapshot(_snapshot("hot", next(counter), history))

    async def latest() -> None:
        assert (await steps.latest_snapshot(run_id="read")) is not None

    async def save_pictured() -> None:
        await steps.save_snapshot(_snapshot("hot-pictured", next(counter), pictured))

    async def latest_pictured() -> None:
        assert (await steps.latest_snapshot(run_id="pictured")) is not None

    async def events() -> None:
        assert len(await steps.list_events(run_id="read")) == EVENTS

    return {
        "run start (get_run, register_run, append_event)": run_start,
        "tool effect (record, get, record)": tool_effect,
        "append_event": append,
        "save_snapshot (12 messages)": save,
        f"latest_snapshot (of {SNAPSHOTS})": latest,
        "save_snapshot (+ 100 KB image)": save_pictured,
        "latest_snapshot (+ 100 KB image)": latest_pictured,
        f"list_events ({EVENTS})": events,
    }


@asynccontextmanager
async def asyncpg_memory(base_url: str, schema: str) -> AsyncIterator[PostgresMemoryStore | None]:
    """The harness's ``PostgresMemoryStore`` in ``schema`` on an asyncpg pool; ``None`` without asyncpg."""
    try:
        import asyncpg  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        yield None
        return
    pool = await asyncpg.create_pool(base_url, min_size=1, max_size=2, server_settings={"search_path": schema})
    try:
        yield PostgresMemoryStore(pool)
    finally:
        await pool.close()


@asynccontextmanager
async def psycopg_memory(base_url: str, schema: str) -> AsyncIterator[PostgresMemoryStore]:
    """The harness's ``PostgresMemoryStore`` in ``schema`` on one psycopg connection (``AsyncRawCursor``)."""
    import psycopg

    connection = await psycopg.AsyncConnection.connect(
        base_url, autocommit=True, cursor_factory=psycopg.AsyncRawCursor, options=f"-csearch_path={schema}"
    )
    try:
        yield PostgresMemoryStore(_RawPool(connection))
    finally:
        await connection.close()


class _RawPool:
    """asyncpg's pool surface that ``PostgresMemoryStore`` uses, on one psycopg connection (``$1`` placeholders)."""

    def __init__(self, connection: Any) -> None:
        self._connection = _RawConnection(connection)
        self._lock = asyncio.Lock()

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[Any]:
        async with self._lock:
            yield self._connection


class _RawConnection:
    def __init__(self, connection: Any) -> None:
        self._connection = connection

    def transaction(self) -> Any:
        return self._connection.transaction()

    async def execute(self, query: str, *args: object) -> None:
        await self._connection.execute(query, args or None)

    async def fetch(self, query: str, *args: object) -> list[Any]:
        cursor = await self._connection.execute(query, args or None)
        return await cursor.fetchall()

    async def fetchrow(self, query: str, *args: object) -> Any:
        cursor = await self._connection.execute(query, args or None)
        return await cursor.fetchone()

    async def fetchval(self, query: str, *args: object) -> Any:
        row = await self.fetchrow(query, *args)
        return None if row is None else row[0]


async def race(title: str, contenders: dict[str, Ops], rounds: int, calls: int) -> None:
    await arace(title, contenders, rounds, calls)


async def main(rounds: int, calls: int, postgres_url: str | None) -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = durastate.open(Path(folder, "durastate.db"), durability="full")
        ours_memory, ours_steps = DurastateMemoryStore(store=store), DurastateStepStore(store=store)
        theirs_memory = SqliteMemoryStore(database=Path(folder, "memory.db"))
        theirs_steps = SqliteStepStore(database=Path(folder, "steps.db"))
        try:
            contenders = {"durastate": await memory_ops(ours_memory), "harness": await memory_ops(theirs_memory)}
            for label in contenders:
                contenders[label].update(await step_ops(ours_steps if label == "durastate" else theirs_steps))
            await race(
                "SQLite, durastate durability='full' vs the harness's SqliteMemoryStore / SqliteStepStore",
                contenders,
                rounds,
                calls,
            )
        finally:
            ours_memory.close()
            ours_steps.close()
            store.close()
        if postgres_url is None:
            return
        async with AsyncExitStack() as stack:
            ours_url, _ = stack.enter_context(postgres_schema(postgres_url))
            _, asyncpg_schema = stack.enter_context(postgres_schema(postgres_url))
            _, psycopg_schema = stack.enter_context(postgres_schema(postgres_url))
            pg_store = stack.enter_context(durastate.open(ours_url))
            ours_memory, ours_steps = DurastateMemoryStore(store=pg_store), DurastateStepStore(store=pg_store)
            stack.callback(ours_memory.close)
            stack.callback(ours_steps.close)
            contenders = {"durastate": await memory_ops(ours_memory)}
            on_asyncpg = await stack.enter_async_context(asyncpg_memory(postgres_url, asyncpg_schema))
            if on_asyncpg is None:
                print("\n(asyncpg is not installed: the harness's PostgresMemoryStore runs on psycopg only)")
            else:
                contenders["harness-asyncpg"] = await memory_ops(on_asyncpg)
            on_psycopg = await stack.enter_async_context(psycopg_memory(postgres_url, psycopg_schema))
            contenders["harness-psycopg"] = await memory_ops(on_psycopg)
            await race("PostgreSQL memory: durastate vs the harness's PostgresMemoryStore", contenders, rounds, calls)
            steps_peer = SqliteStepStore(database=Path(folder, "steps-ref.db"))
            contenders = {"durastate-pg": await step_ops(ours_steps), "harness-sqlite": await step_ops(steps_peer)}
            await race(
                "PostgreSQL steps: durastate on PostgreSQL vs the harness's SqliteStepStore (none on PostgreSQL)",
                contenders,
                rounds,
                calls,
            )


if __name__ == "__main__":
    args = arguments(__doc__, durability=False)
    asyncio.run(main(args.rounds, args.calls, args.postgres_url))
