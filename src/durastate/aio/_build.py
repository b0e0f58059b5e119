"""How an async facade is made from a sync facet: one declaration, no twin methods.

A facade class is built from the sync facet's class: every public method of
the sync class becomes a method of the facade that runs the very same sync
method through the store's ``AsyncRunner`` (see ``durastate._aio`` for
where a call runs). A ``Method`` declaration says how methods that do more
than return a value are driven:

* ``CALL`` (the default): ``await facade.m(...)`` returns what ``m`` returns;
  ``undo`` (if given) releases a result the caller was cancelled before
  receiving (a claim); ``wrap`` turns the result into another facade (a
  queue ``Claim`` into an ``AsyncClaim``); ``reads``: ``m`` changes nothing,
  so it runs inline wherever the engine runs reads inline, at
  ``durability="full"`` too (``AsyncRunner.call(reads=True)``). ``ITER``
  and ``STREAM`` steps are reads.
* ``PLAIN``: no I/O (``kv.scope``, ``events.channel``): called directly,
  not awaited; ``wrap`` as above.
* ``ITER``: the sync method returns a paging iterator (``kv.scan``); the
  facade method returns an async iterator over it, each step inline on
  SQLite, a page per worker hop otherwise. The first page is read at the
  first step, so argument errors surface there.
* ``STREAM``: the sync method is a blocking generator taking a
  ``threading.Event`` ``stop`` (``events.stream``) made of a ``Tail``
  (``durastate._tail``), which ``Method.tail`` gives; the facade follows
  the same ``Tail`` (``FollowedTail``): each read on the store's runner,
  each wait awaited on the loop (no thread held), ending at ``aclose()`` or
  when the store is closed.
* ``WAIT``: the sync method takes ``wait=`` seconds and answers ``None``
  when nothing is there (``queues.claim``/``pop``); the facade registers
  the method's change watch first (``Method.watch``, ``engines.watch``),
  calls it without ``wait`` and, while it answers ``None`` and time is
  left, awaits the watch on the loop (no thread, no connection is held:
  PostgreSQL's listener wakes it with ``call_soon_threadsafe``; elsewhere
  the watch polls every 50 ms, as the sync method does), so cancelling a
  wait is always clean.
* ``CONTEXT``: the sync method returns a context manager holding a
  transaction (``documents.lock``); the facade method returns an async
  context manager that runs it on a thread pinned to the block (see
  ``PinnedBlock``).
"""

from __future__ import annotations

import asyncio
import inspect
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Generic, TypeVar

from .._aio import FINISH, AsyncRunner, Undo
from .._tail import Tail
from .._validate import as_wait
from ..engines.loop import inline_site
from ..engines.sqlite import LockBusy
from ..engines.transaction import BlockRefused
from ..engines.watch import ChangeWatch
from ..errors import InvalidRequest, StoreClosed

T = TypeVar("T")

CALL = "call"
PLAIN = "plain"
ITER = "iter"
STREAM = "stream"
WAIT = "wait"
CONTEXT = "context"

ITER_BATCH = 512  # items one worker hop takes from an ITER iterator


@dataclass(frozen=True)
class Method:
    """How one sync method is driven from async code (see the module docstring)."""

    kind: str = CALL
    # CALL: the method changes nothing (AsyncRunner.call's ``reads``). Declared only for methods that never write:
    # one that did would wait for its commit's fsync on the loop's thread (correct, but the loop stalls).
    reads: bool = False
    # undo(sync_facet, result): release a result whose caller was cancelled.
    undo: Callable[[Any, Any], object] | None = None
    # Name of the facade class (in the same registry) to wrap the result in.
    wrap: str | None = None
    # WAIT: watch(sync_facet, *args, **kwargs), the ChangeWatch the sync method's own wait registers (required).
    watch: Callable[..., ChangeWatch] | None = None
    # WAIT: look_again_at(sync_facet, watch, deadline, *args, **kwargs), a read run after an empty try
    # when the watch is reliable: the time.monotonic() to try again at unless woken (None: at the deadline).
    look_again_at: Callable[..., float] | None = None
    # STREAM: tail(sync_facet, *args, **kwargs), the sync stream's Tail for the same arguments (required).
    tail: Callable[..., Tail[Any, Any]] | None = None


@dataclass(frozen=True)
class FacadeSpec:
    """A facade: its class name, the sync class, and the methods that are not plain ``CALL``s."""

    name: str
    sync: type
    methods: dict[str, Method] = field(default_factory=dict)
    # Read-only attributes passed through to the sync object (a Claim's
    # payload), with their type for the generated stub.
    attributes: dict[str, str] = field(default_factory=dict)


def public_methods(cls: type) -> list[str]:
    """The public methods of ``cls`` (functions and static methods, not properties), sorted."""
    names = []
    for name in dir(cls):
        if name.startswith("_"):
            continue
        raw = inspect.getattr_static(cls, name)
        if isinstance(raw, staticmethod) or inspect.isfunction(raw):
            names.append(name)
    return sorted(names)


# -- transactions pinned to one thread -----------------------------------------------


class _Route:
    """The pinned runner that calls of ``task`` on ``store_runner`` go to."""

    __slots__ = ("pinned", "store_runner", "task")

    def __init__(self, store_runner: AsyncRunner, pinned: AsyncRunner, task: asyncio.Task[Any] | None) -> None:
        self.store_runner = store_runner
        self.pinned = pinned
        self.task = task


# The transaction (or lock) block the current task is inside, per task
# context: a task created inside the block inherits the variable but is not
# its task, so it is not routed into it (see runner_for).
_CURRENT_BLOCK: ContextVar[_Route | None] = ContextVar("durastate_aio_block", default=None)


def runner_for(runner: AsyncRunner) -> AsyncRunner:
    """The runner a call made now should use: the task's open block on this store, else ``runner``."""
    route = _CURRENT_BLOCK.get()
    if route is not None and route.store_runner is runner and route.task is asyncio.current_task():
        return route.pinned
    return runner


class PinnedBlock(Generic[T]):
    """``async with``: a sync context manager holding a transaction, on one pinned thread.

    ``__aenter__`` borrows a thread from the store's runner (``pinned()``)
    and enters the context manager there; every call of this task on this
    store inside the block runs on that thread, so it joins the transaction
    (and nothing else does: other coroutines keep their own connections and
    do not see its writes until it commits). ``__aexit__`` leaves it on the
    same thread: commit, or roll back on any exception (cancellation
    included). ``result(pinned_runner)`` is what ``as`` binds.

    One object is one block at a time: entering it while it is open (from
    inside itself, or from another task) raises ``InvalidRequest`` and
    leaves the open block as it was; ``again`` names the call that makes a
    new block. Once it has ended it may be entered again. Leaving it when
    it is not open raises ``InvalidRequest`` too (the sync block's
    ``BlockRefused``: then it stays open as it was, on its thread); leaving
    it while a block opened inside it is still open rolls both back.
    """

    def __init__(
        self,
        runner: AsyncRunner,
        make: Callable[[], AbstractContextManager[Any]],
        result: Callable[[AsyncRunner], T],
        again: str = "the method that made it",
    ) -> None:
        # A block opened on a transaction's view nests in that transaction,
        # whichever task opens it.
        self._within = None if runner.root is runner else runner
        self._runner = runner.root
        self._make = make
        self._result = result
        self._pinned: AsyncRunner | None = None
        self._cm: AbstractContextManager[Any] | None = None
        self._token: Token[_Route | None] | None = None
        self._owns_pin = False
        self._again = again

    async def __aenter__(self) -> T:
        if self._pinned is not None:  # open (or being entered): set below, cleared when it ends
            raise InvalidRequest(
                f"this async with block is already open (one object is one block at a time); "
                f"call {self._again} again for a nested block"
            )
        outer = self._within or runner_for(self._runner)
        self._owns_pin = outer is self._runner
        # Nested in this task's open block: a savepoint on the same thread.
        pinned = self._pinned = self._runner.pinned() if self._owns_pin else outer

        def enter() -> AbstractContextManager[Any]:
            cm = self._make()
            cm.__enter__()
            pinned.block_entered(cm)  # from here close() rolls it back if this task abandons it
            return cm

        def leave_unreceived(cm: AbstractContextManager[Any]) -> None:
            _leave_block(pinned, cm, asyncio.CancelledError, asyncio.CancelledError(), None)

        try:
            self._cm = await pinned.on_thread(enter, (), {}, leave_unreceived)
        except BaseException:
            self._release_pinned()
            raise
        if self._owns_pin:
            self._token = _CURRENT_BLOCK.set(_Route(self._runner, pinned, asyncio.current_task()))
            self._runner.blocks_open += 1
        return self._result(pinned)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        pinned, cm = self._pinned, self._cm
        if pinned is None or cm is None:
            raise InvalidRequest("this async with block is not open: never entered, or ended already")
        self._cm = None  # leaving: a second __aexit__ meanwhile is refused above
        try:
            # FINISH: a cancellation while leaving must not skip the commit or rollback, nor hand the thread
            # back (nor let the caller go on) before it is done. Even if the store is closing: close() waits
            # for it, or has rolled the block back already (then _leave_block says so).
            left = await pinned.on_thread(
                _leave_block, (pinned, cm, exc_type, exc, tb), {}, if_cancelled=FINISH, even_if_closed=True
            )
        except BlockRefused:
            # Refused before anything changed (ended from a thread that did not enter it, say): this block
            # stays open on its thread, its calls still routed there.
            self._cm = cm
            raise
        except BaseException:
            self._ended()
            raise
        self._ended()
        if not left and exc is None:
            raise StoreClosed("the store was closed while this block was open: it was rolled back, nothing committed")

    def _ended(self) -> None:
        """The block has ended (committed or rolled back): calls route as before it, its thread goes back."""
        if self._token is not None:
            _CURRENT_BLOCK.reset(self._token)
            self._token = None
            self._runner.blocks_open -= 1
        self._release_pinned()

    def _release_pinned(self) -> None:
        pinned, self._pinned = self._pinned, None
        if pinned is not None and self._owns_pin:
            self._runner.unpin(pinned)


def _leave_block(
    pinned: AsyncRunner,
    cm: AbstractContextManager[Any],
    exc_type: type[BaseException] | None,
    exc: BaseException | None,
    tb: TracebackType | None,
) -> bool:
    """On the block's pinned thread: leave ``cm`` (commit, or roll back); False if ``close()`` rolled it back."""
    if not pinned.block_left(cm):
        return False
    try:
        cm.__exit__(exc_type, exc, tb)
    except BlockRefused:  # refused before anything changed: still open
        pinned.block_entered(cm)
        raise
    return True


# -- async iterators ------------------------------------------------------------------


def _take(it: Iterator[Any], count: int) -> list[Any]:
    batch = []
    for item in it:
        batch.append(item)
        if len(batch) >= count:
            break
    return batch


def _next_or_end(it: Iterator[Any]) -> tuple[bool, Any]:
    for item in it:
        return True, item
    return False, None


class PagedIterator:
    """``async for`` over a sync paging iterator (``ITER``); see the module docstring."""

    def __init__(self, runner: AsyncRunner, make: Callable[[], Iterator[Any]]) -> None:
        self._runner = runner
        self._make: Callable[[], Iterator[Any]] | None = make
        self._it: Iterator[Any] | None = None
        self._buffer: deque[Any] = deque()
        self._done = False

    def __aiter__(self) -> PagedIterator:
        return self

    async def __anext__(self) -> Any:
        if self._buffer:
            return self._buffer.popleft()
        if self._done:
            raise StopAsyncIteration
        runner = runner_for(self._runner)
        if self._it is None:
            assert self._make is not None
            self._it = await runner.call(self._make, (), {}, reads=True)  # cancelled: made again at the next step
            self._make = None
        if runner.inline_reads:
            # Inline, and never handed off: a generator that raised is
            # finished, so running it again elsewhere would end the
            # iteration early instead of reporting the error (a WAL read
            # is practically never refused; if it is, it raises).
            more, item = _next_or_end(self._it)
            if not more:
                self._done = True
                raise StopAsyncIteration
            return item
        # A batch taken for a step that was cancelled is kept for the next (undo): the iterator moved past it.
        batch = await runner.call(_take, (self._it, ITER_BATCH), {}, self._buffer.extend, reads=True)
        if len(batch) < ITER_BATCH:
            self._done = True
        if not batch:
            raise StopAsyncIteration
        self._buffer.extend(batch)
        return self._buffer.popleft()

    async def aclose(self) -> None:
        self._done = True
        self._buffer.clear()
        close = getattr(self._it, "close", None)
        if close is not None:
            close()


class FollowedTail:
    """``async for`` over a ``Tail`` (``STREAM``); see the module docstring.

    The ``Tail`` is made (its arguments checked) at the first step, and its
    watch registered then, before the first read. A read cancelled midway
    changes nothing (the cursor moves only with items handed out). Ends at
    ``aclose()`` (looked at every ``poll_interval`` seconds while waiting)
    or once the store is closed.
    """

    def __init__(self, runner: AsyncRunner, make: Callable[[], Tail[Any, Any]]) -> None:
        self._runner = runner
        self._make: Callable[[], Tail[Any, Any]] | None = make
        self._tail: Tail[Any, Any] | None = None
        self._watch: ChangeWatch | None = None
        self._cursor: Any = None
        self._buffer: deque[Any] = deque()
        self._done = False

    def __aiter__(self) -> FollowedTail:
        return self

    async def __anext__(self) -> Any:
        if self._buffer:
            return self._buffer.popleft()
        tail = self._tail
        if tail is None:
            if self._done:
                raise StopAsyncIteration
            make, self._make = self._make, None
            assert make is not None
            tail = make()
            try:
                self._watch = tail.watch()
            except StoreClosed:
                self._done = True
                raise StopAsyncIteration from None
            weakref.finalize(self, self._watch.close)  # a stream dropped without aclose() stops watching
            self._tail, self._cursor = tail, tail.start
        watch = self._watch
        assert watch is not None
        while not self._done:
            try:
                items, cursor = await self._runner.call(tail.read_after, (self._cursor,), {}, reads=True)
            except StoreClosed:
                await self.aclose()
                break
            if items:
                self._cursor = cursor
                self._buffer.extend(items)
                return self._buffer.popleft()
            while not await watch.wait_async(tail.poll_interval):
                if self._done:
                    break
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self._done = True
        self._buffer.clear()
        if self._watch is not None:
            self._watch.close()


# -- building facade classes ------------------------------------------------------------


class Facade:
    """Base of every generated facade: the sync object and the store's runner."""

    __slots__ = ("_bound", "_runner", "_sync")
    _call_names: tuple[str, ...] = ()

    def __init__(self, sync: Any, runner: AsyncRunner) -> None:
        self._sync = sync
        self._runner = runner
        # The sync object's bound methods, made once (the hot path skips getattr).
        self._bound = {name: getattr(sync, name) for name in self._call_names}

    def __repr__(self) -> str:
        return f"<async {self._sync!r}>"


def _wrapper(registry: dict[str, type[Facade]], wrap: str | None) -> Callable[[Facade, Any], Any] | None:
    if wrap is None:
        return None

    def wrap_result(owner: Facade, result: Any) -> Any:
        if result is None:
            return None
        return registry[wrap](result, owner._runner)

    return wrap_result


def _make_call(
    name: str, undo_spec: Callable[[Any, Any], object] | None, wrap: Callable[..., Any] | None, reads: bool = False
) -> Any:
    if undo_spec is None and wrap is None:
        # The hot path: ``AsyncRunner.call`` written out in one coroutine
        # (saves a call per await, a tenth of a point read).
        async def call(self: Facade, /, *args: Any, **kwargs: Any) -> Any:
            runner = self._runner
            if runner.blocks_open:
                runner = runner_for(runner)
            method = self._bound[name]
            no_wait = runner.no_wait_reads if reads else runner.no_wait
            if no_wait is not None:
                before = no_wait()
                try:
                    return method(*args, **kwargs)
                except LockBusy:
                    if no_wait() != before:
                        raise
            return await runner.on_thread(method, args, kwargs)

        inline_site(call)  # as AsyncRunner.call: a lock met under it is refused at once (one code, every facade)
        return call

    async def call_and_wrap(self: Facade, /, *args: Any, **kwargs: Any) -> Any:
        undo: Undo | None = None
        if undo_spec is not None:
            sync, spec = self._sync, undo_spec

            def undo(result: Any) -> object:
                return spec(sync, result)

        result = await runner_for(self._runner).call(getattr(self._sync, name), args, kwargs, undo, reads=reads)
        return result if wrap is None else wrap(self, result)

    return call_and_wrap


def _make_wait(
    name: str,
    undo_spec: Callable[[Any, Any], object] | None,
    wrap: Callable[..., Any] | None,
    make_watch: Callable[..., ChangeWatch],
    look_again_at: Callable[..., float] | None,
) -> Any:
    attempt = _make_call(name, undo_spec, wrap)

    async def wait_for(self: Facade, /, *args: Any, wait: float | None = None, **kwargs: Any) -> Any:
        seconds = None if wait is None else as_wait(wait)
        if not seconds:
            return await attempt(self, *args, **kwargs)
        deadline = time.monotonic() + seconds
        # Registered before the first try: a change between a try and the wait wakes the wait.
        watch = make_watch(self._sync, *args, **kwargs)
        try:
            while True:
                result = await attempt(self, *args, **kwargs)
                if result is not None:
                    return result
                look_at = deadline
                if look_again_at is not None and watch.reliable:  # a polling watch looks again anyway
                    look_at = await runner_for(self._runner).call(
                        look_again_at, (self._sync, watch, deadline, *args), kwargs, reads=True
                    )
                if not await watch.wait_until_async(look_at) and look_at >= deadline:
                    return None
        finally:
            watch.close()

    return wait_for


def _make_plain(name: str, wrap: Callable[..., Any] | None) -> Any:
    def plain(self: Facade, /, *args: Any, **kwargs: Any) -> Any:
        result = getattr(self._sync, name)(*args, **kwargs)
        return result if wrap is None else wrap(self, result)

    return plain


def _make_iter(name: str) -> Any:
    def paged(self: Facade, /, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        method = getattr(self._sync, name)
        return PagedIterator(self._runner, lambda: method(*args, **kwargs))

    return paged


def _make_stream(make_tail: Callable[..., Tail[Any, Any]]) -> Any:
    def stream(self: Facade, /, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        sync = self._sync
        return FollowedTail(self._runner, lambda: make_tail(sync, *args, **kwargs))

    return stream


def _make_context(name: str) -> Any:
    def block(self: Facade, /, *args: Any, **kwargs: Any) -> PinnedBlock[None]:
        method = getattr(self._sync, name)
        return PinnedBlock(self._runner, lambda: method(*args, **kwargs), lambda _pinned: None, f"{name}(...)")

    return block


def _make_attribute(name: str) -> property:
    return property(lambda self: getattr(self._sync, name), doc=f"The sync object's ``{name}``.")


def build_facades(specs: list[FacadeSpec]) -> dict[str, type[Facade]]:
    """One facade class per spec, by name (results wrap into each other through the registry)."""
    registry: dict[str, type[Facade]] = {}
    for spec in specs:
        names = public_methods(spec.sync)
        unknown = set(spec.methods) - set(names)
        if unknown:
            raise TypeError(f"{spec.name}: {spec.sync.__name__} has no public method {sorted(unknown)}")
        namespace: dict[str, Any] = {"__slots__": (), "__doc__": f"Async facade of ``{spec.sync.__qualname__}``."}
        namespace["_call_names"] = tuple(n for n in names if spec.methods.get(n, Method()).kind in (CALL, WAIT))
        for name in names:
            declared = spec.methods.get(name, Method())
            wrap = _wrapper(registry, declared.wrap)
            if declared.kind == CALL:
                function = _make_call(name, declared.undo, wrap, declared.reads)
            elif declared.kind == WAIT:
                if declared.watch is None:
                    raise TypeError(f"{spec.name}.{name}: a WAIT method declares its watch")
                function = _make_wait(name, declared.undo, wrap, declared.watch, declared.look_again_at)
            elif declared.kind == PLAIN:
                function = _make_plain(name, wrap)
            elif declared.kind == ITER:
                function = _make_iter(name)
            elif declared.kind == STREAM:
                if declared.tail is None:
                    raise TypeError(f"{spec.name}.{name}: a STREAM method declares its tail")
                function = _make_stream(declared.tail)
            elif declared.kind == CONTEXT:
                function = _make_context(name)
            else:
                raise TypeError(f"{spec.name}.{name}: unknown kind {declared.kind!r}")
            if declared.reads and declared.kind != CALL:
                raise TypeError(f"{spec.name}.{name}: only a CALL method declares reads (ITER and STREAM read anyway)")
            function.__name__ = name
            function.__qualname__ = f"{spec.name}.{name}"
            function.__doc__ = getattr(spec.sync, name).__doc__
            namespace[name] = function
        for attribute in spec.attributes:
            namespace[attribute] = _make_attribute(attribute)
        registry[spec.name] = type(spec.name, (Facade,), namespace)
    return registry
