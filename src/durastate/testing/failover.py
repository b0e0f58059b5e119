"""A mixed workload that logs every acknowledged call, and the checks that nothing acknowledged was lost.

Run as a process: ``python -m durastate.testing.failover URL LOG STOP MODE TAG``.
It opens ONE store on ``URL`` (``MODE`` ``sync``: ``durastate.open``, its
calls on worker threads; ``async``: ``durastate.aio.open``) and loops, until
the file ``STOP`` exists, over: kv put, incr and append; a document
compare-and-swap; queue push, claim, then ack (most), nack (every fifth) or
abandon (every seventh: the lease must run out and the item come back);
events append, claim and complete; a records commit. A waiter task blocks
in ``claim(wait=)`` on a queue of its own, fed by the loop. Every call that
returned is one JSON line in ``LOG`` (``op``, what it wrote or got, ``t``:
``time.monotonic()`` when it returned, shared by the processes of one
machine); a call that raised is an ``error`` line with its
``DurastateError`` type, and the loop goes on with the same store.

``check(url, logs)`` (the processes stopped) then proves against the
store what the lines promise: every acknowledged write is there, no
increment, append, commit or event applied twice, every queue item pushed
is acknowledged exactly once once the abandoned leases ran out (the check
claims what is left, waiting for redelivery, and acknowledges it). It
returns what it found, for the test to assert on and report.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import durastate

__all__ = ["LEASE", "Outcome", "Workers", "check", "main", "read_log", "woke_after", "write_stall", "writes_after"]

LEASE = 2.0  # seconds a workload claim holds a queue item (an abandoned one comes back after this)
WORK, WAKE = "work", "wake"  # the claim/ack queue and the waiter's queue
WRITES = frozenset({"put", "incr", "append", "cas", "push", "ack", "nack", "event", "complete", "commit", "wake_push"})


class _Log:
    def __init__(self, path: str) -> None:
        self._file = open(path, "a", buffering=1)  # noqa: SIM115 (closed by main)

    def __call__(self, op: str, **fields: Any) -> None:
        self._file.write(json.dumps({"op": op, "t": time.monotonic(), **fields}) + "\n")

    def close(self) -> None:
        self._file.close()


async def _workload(store: Any, call: Callable[..., Any], log: _Log, stop: Path, tag: str) -> None:
    """The loop (see the module docstring); ``call(f, *args)`` runs one store call, sync or async alike."""
    scope = tag.encode()
    conversation = await call(store.records.mint_id)
    await call(store.records.commit, [{"type": "conversation", "value": {"id": conversation}}])
    log("conversation", id=conversation)
    revision = 0
    claims = 0
    waiter = asyncio.ensure_future(_waiter(store, call, log, stop))
    i = 0
    while not stop.exists():
        i += 1
        steps: list[tuple[str, Callable[..., Any], tuple[Any, ...]]] = [
            ("put", _put, (scope, i)),
            ("incr", _incr, (scope,)),
            ("append", _append, (scope, i)),
            ("cas", _cas, (tag, revision)),
            ("queue", _queue, (tag, i, claims)),
            ("events", _events, (tag, i)),
            ("commit", _commit, (conversation, tag, i)),
        ]
        if i % 4 == 0:
            steps.append(("wake_push", _wake_push, (tag, i)))
        for name, step, args in steps:
            try:
                result = await step(store, call, log, *args)
            except durastate.DurastateError as exc:
                log("error", what=name, error=type(exc).__name__, message=str(exc)[:300], where=_where(exc))
                if name == "cas":
                    revision = -1  # re-read before the next compare-and-swap
                continue
            if name == "cas":
                revision = result
            elif name == "queue":
                claims = result
    await waiter


def _where(exc: BaseException) -> list[str]:
    """The innermost frames that raised ``exc`` (file:line function), for the report."""
    frames = traceback.extract_tb(exc.__traceback__)[-6:]
    return [f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} {f.name}" for f in frames]


async def _put(store: Any, call: Callable[..., Any], log: _Log, scope: bytes, i: int) -> None:
    await call(store.kv.put, scope, b"put", b"%d" % i, b"%d" % i)
    log("put", key=i)


async def _incr(store: Any, call: Callable[..., Any], log: _Log, scope: bytes) -> None:
    log("incr", value=await call(store.kv.incr, scope, b"ctr", b"n"))


async def _append(store: Any, call: Callable[..., Any], log: _Log, scope: bytes, i: int) -> None:
    ordinal = await call(store.kv.append, scope, b"log", b"l", b"%d" % i)
    log("append", value=i, ordinal=ordinal)


async def _cas(store: Any, call: Callable[..., Any], log: _Log, tag: str, revision: int) -> int:
    key = f"doc-{tag}"
    if revision < 0:
        current = await call(store.documents.read, key)
        revision = 0 if current is None else current.revision
        log("cas_read", revision=revision, n=None if current is None else current.data["n"])
    try:
        new = await call(store.documents.write, key, {"n": revision + 1}, expect=revision)
    except durastate.Conflict:
        log("cas_conflict", expected=revision)
        return -1
    log("cas", revision=new, n=revision + 1)
    return int(new)


async def _queue(store: Any, call: Callable[..., Any], log: _Log, tag: str, i: int, claims: int) -> int:
    payload = f"{tag}:{i}".encode()
    await call(store.queues.push, WORK, [payload], max_attempts=1000)
    log("push", item=payload.decode())
    job = await call(store.queues.claim, WORK, lease=LEASE)
    if job is None:
        return claims
    claims += 1
    item = job.payload.decode()
    log("claim", item=item, attempts=job.attempts)
    if claims % 7 == 0:
        log("abandon", item=item)  # never settled: the lease runs out, the item must come back
    elif claims % 5 == 0:
        await call(job.nack)
        log("nack", item=item)
    else:
        try:
            await call(job.ack)
        except durastate.Conflict:
            log("lease_lost", item=item)  # the stall outlasted the lease: not acknowledged, it comes back
            return claims
        except durastate.DurastateError:
            log("ack_unknown", item=item)  # applied or not: the check accepts either
            raise
        log("ack", item=item)
    return claims


async def _events(store: Any, call: Callable[..., Any], log: _Log, tag: str, i: int) -> None:
    session = f"session-{tag}"
    await call(store.events.append, session, [{"id": f"e-{tag}-{i}", "type": "work", "payload": {"i": i}}])
    log("event", id=f"e-{tag}-{i}")
    claimed = await call(store.events.claim_available, session, f"holder-{tag}", ttl_ms=int(LEASE * 1000), limit=1)
    for event in claimed.events:
        child = f"c-{event.id}-{event.attempt_count}"
        done = await call(
            store.events.complete_attempt,
            session,
            event.index,
            event.attempt_count,
            [{"id": child, "type": "done", "payload": {}}],
        )
        if done.outcome == "completed":
            log("complete", id=event.id, child=child)


async def _commit(store: Any, call: Callable[..., Any], log: _Log, conversation: int, tag: str, i: int) -> None:
    entry = await call(store.records.mint_id)
    value = {"id": entry, "conversationId": conversation, "role": "user", "text": f"{tag}-{i}"}
    seq = await call(store.records.commit, [{"type": "entry", "value": value}])
    log("commit", id=entry, seq=seq)


async def _wake_push(store: Any, call: Callable[..., Any], log: _Log, tag: str, i: int) -> None:
    payload = f"{tag}:wake:{i}"
    await call(store.queues.push, WAKE, [payload.encode()])
    log("wake_push", item=payload)


async def _waiter(store: Any, call: Callable[..., Any], log: _Log, stop: Path) -> None:
    """Block in ``claim(wait=)`` on the wake queue; log and ack what arrives."""
    while not stop.exists():
        try:
            job = await call(store.queues.claim, WAKE, lease=LEASE, wait=1.0)
            if job is not None:
                log("woke", item=job.payload.decode())
                try:
                    await call(job.ack)
                except durastate.Conflict:
                    log("lease_lost", item=job.payload.decode())  # it comes back to a waiter
        except durastate.DurastateError as exc:
            log("error", what="waiter", error=type(exc).__name__, message=str(exc)[:300], where=_where(exc))


async def _run(url: str, log_path: str, stop: Path, mode: str, tag: str) -> None:
    log = _Log(log_path)
    try:
        if mode == "async":
            from durastate import aio

            async def call_async(f: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
                return await f(*args, **kwargs)

            async with await aio.open(url) as astore:
                log("open")
                await _workload(astore, call_async, log, stop, tag)
        else:

            async def call_sync(f: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
                return await asyncio.to_thread(f, *args, **kwargs)

            with durastate.open(url) as store:
                log("open")
                await _workload(store, call_sync, log, stop, tag)
        log("done")
    finally:
        log.close()


def main(argv: list[str]) -> None:
    url, log_path, stop, mode, tag = argv
    asyncio.run(_run(url, log_path, Path(stop), mode, tag))


# -- reading the logs and checking the store ---------------------------------------------


class Workers:
    """Workload processes (one per ``modes`` entry, tagged ``p0``, ``p1``, ...) and their logs under ``folder``.

    ``prefix``: the command that runs ``main`` (default ``python -m
    durastate.testing.failover``; a benchmark may run a patched one).
    """

    def __init__(self, url: str, folder: Path, modes: Sequence[str], prefix: Sequence[str] = ()) -> None:
        self.stop_file = folder / "stop"
        self.logs = {f"p{i}": folder / f"p{i}.jsonl" for i in range(len(modes))}
        command = list(prefix) or [sys.executable, "-m", "durastate.testing.failover"]
        self.processes = []
        for (tag, log), mode in zip(self.logs.items(), modes, strict=True):
            with open(folder / f"{tag}.stderr", "wb") as stderr:
                self.processes.append(
                    subprocess.Popen([*command, url, str(log), str(self.stop_file), mode, tag], stderr=stderr)
                )
        self.folder = folder

    def lines(self) -> dict[str, list[dict[str, Any]]]:
        return {tag: read_log(path) if path.exists() else [] for tag, path in self.logs.items()}

    def all_lines(self) -> list[dict[str, Any]]:
        return [line for tag_lines in self.lines().values() for line in tag_lines]

    def wait_until(self, what: str, done: Callable[[list[dict[str, Any]]], bool], timeout: float = 60.0) -> None:
        """Poll the logs (every 100 ms) until ``done(one process's lines)`` holds for every process.

        ``AssertionError`` (with the logs' tails) when a process exited or ``timeout`` passed.
        """
        deadline = time.monotonic() + timeout
        while True:
            lines = self.lines()
            if all(done(tag_lines) for tag_lines in lines.values()):
                return
            for p in self.processes:
                assert p.poll() is None, f"a workload process exited ({p.returncode}): {self.stderr()}"
            assert time.monotonic() < deadline, f"{what}: {self.summary(lines)}"
            time.sleep(0.1)

    def stop(self, timeout: float = 60.0) -> None:
        """Ask every process to stop and wait; ``AssertionError`` if one failed or hung (then it is killed)."""
        self.stop_file.touch()
        for p in self.processes:
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                raise AssertionError(f"a workload process did not stop: {self.stderr()}") from None
            assert p.returncode == 0, f"a workload process failed ({p.returncode}): {self.stderr()}"

    def kill(self) -> None:
        for p in self.processes:
            if p.poll() is None:
                p.kill()
                p.wait()

    def stderr(self) -> str:
        return " | ".join(path.read_text()[-2000:] for path in sorted(self.folder.glob("*.stderr")))

    @staticmethod
    def summary(lines: dict[str, list[dict[str, Any]]]) -> str:
        return "; ".join(f"{tag}: {len(tl)} lines, last {tl[-3:] if tl else None}" for tag, tl in lines.items())


def writes_after(t: float, count: int = 20) -> Callable[[list[dict[str, Any]]], bool]:
    """For ``Workers.wait_until``: at least ``count`` writes acknowledged after ``t``."""
    return lambda lines: sum(1 for line in lines if line["op"] in WRITES and line["t"] > t) >= count


def woke_after(t: float) -> Callable[[list[dict[str, Any]]], bool]:
    """For ``Workers.wait_until``: the waiter took an item after ``t``."""
    return lambda lines: any(line["op"] == "woke" and line["t"] > t for line in lines)


def read_log(path: Path) -> list[dict[str, Any]]:
    """The lines of one process's log (a torn last line, from a killed process, is skipped)."""
    lines = []
    for line in path.read_text().splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            pass
    return lines


def write_stall(lines: Iterable[dict[str, Any]], fault_at: float) -> float:
    """Seconds from ``fault_at`` to the first write acknowledged after the longest gap following it.

    Writes are acknowledged every few milliseconds before a fault; the
    longest gap between consecutive write acknowledgements (any process)
    starting within a second of the fault is the stall it caused, measured
    from the fault to its end.
    """
    times = sorted(line["t"] for line in lines if line["op"] in WRITES and line["t"] >= fault_at - 1.0)
    best_end, best_gap = fault_at, 0.0
    for before, after in itertools.pairwise(times):
        if before > fault_at + 1.0:
            break
        if after - before > best_gap:
            best_gap, best_end = after - before, after
    return best_end - fault_at


class Outcome:
    """What ``check`` found: counts per operation and every discrepancy (empty when the store kept its word)."""

    def __init__(self) -> None:
        self.acknowledged: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.problems: list[str] = []
        self.redelivered = 0  # abandoned or ambiguous claims the check got back after their lease

    def problem(self, text: str) -> None:
        if len(self.problems) < 50:
            self.problems.append(text)


def check(
    url: str, logs: dict[str, list[dict[str, Any]]], *, final: bool = True, redelivery_timeout: float = 30.0
) -> Outcome:
    """Check the store against the processes' logs (``{tag: lines}``), see the module docstring.

    ``final=False`` while the processes still run: only what they cannot
    change meanwhile (acknowledged writes are there, nothing is there twice,
    a counter is at least its acknowledged increments); the queues are left
    alone.
    """
    out = Outcome()
    with durastate.open(url) as store:
        for tag, lines in logs.items():
            ops: dict[str, list[dict[str, Any]]] = {}
            for line in lines:
                ops.setdefault(line["op"], []).append(line)
                out.acknowledged[line["op"]] += 1
                if line["op"] == "error":
                    out.errors[f"{line['what']}: {line['error']}"] += 1
            _check_kv(store, tag, ops, out, final)
            _check_documents(store, tag, ops, out)
            _check_events(store, tag, ops, out)
            _check_records(store, ops, out, final)
        if final:
            _check_queues(store, logs, out, redelivery_timeout)
    return out


def _ambiguous(ops: dict[str, list[dict[str, Any]]], what: str) -> int:
    return sum(1 for line in ops.get("error", ()) if line["what"] == what)


def _check_kv(
    store: durastate.Store, tag: str, ops: dict[str, list[dict[str, Any]]], out: Outcome, final: bool
) -> None:
    scope = tag.encode()
    for line in ops.get("put", ()):
        key = b"%d" % line["key"]
        if store.kv.get(scope, b"put", key) != key:
            out.problem(f"{tag}: acknowledged put {line['key']} is missing")
    increments = [line["value"] for line in ops.get("incr", ())]
    counter = store.kv.counter(scope, b"ctr", b"n")
    if len(set(increments)) != len(increments):
        out.problem(f"{tag}: an increment returned a value twice")
    if counter < len(increments) or (final and counter > len(increments) + _ambiguous(ops, "incr")):
        out.problem(f"{tag}: counter {counter} for {len(increments)} acknowledged increments")
    appended = Counter(value for _ordinal, value in store.kv.log(scope, b"log", b"l"))
    for line in ops.get("append", ()):
        if appended[b"%d" % line["value"]] != 1:
            out.problem(f"{tag}: append {line['value']} is there {appended[b'%d' % line['value']]} times")
    if final and sum(appended.values()) > len(ops.get("append", ())) + _ambiguous(ops, "append"):
        out.problem(f"{tag}: {sum(appended.values())} log entries for {len(ops.get('append', ()))} appends")


def _check_documents(store: durastate.Store, tag: str, ops: dict[str, list[dict[str, Any]]], out: Outcome) -> None:
    swaps = ops.get("cas", [])
    if not swaps:
        return
    current = store.documents.read(f"doc-{tag}")
    last = swaps[-1]
    if current is None or current.revision < last["revision"] or current.data["n"] < last["n"]:
        out.problem(f"{tag}: document at {current} behind the last acknowledged swap {last}")
    revisions = [line["revision"] for line in swaps]
    if revisions != sorted(set(revisions)):
        out.problem(f"{tag}: acknowledged swaps returned revisions out of order or twice")


def _check_events(store: durastate.Store, tag: str, ops: dict[str, list[dict[str, Any]]], out: Outcome) -> None:
    ids = Counter(event.id for event in store.events.read(f"session-{tag}"))
    for line in ops.get("event", ()):
        if ids[line["id"]] != 1:
            out.problem(f"{tag}: appended event {line['id']} is there {ids[line['id']]} times")
    for line in ops.get("complete", ()):
        if ids[line["child"]] != 1:
            out.problem(f"{tag}: completion {line['child']} is there {ids[line['child']]} times")
    twice = [event_id for event_id, n in ids.items() if n > 1]
    if twice:
        out.problem(f"{tag}: events stored twice: {twice[:5]}")


def _check_records(store: durastate.Store, ops: dict[str, list[dict[str, Any]]], out: Outcome, final: bool) -> None:
    [conversation] = [line["id"] for line in ops.get("conversation", ())] or [None]
    if conversation is None:
        return
    commits = ops.get("commit", [])
    seqs = [line["seq"] for line in commits]
    if len(set(seqs)) != len(seqs):
        out.problem("a commit sequence number was acknowledged twice")
    for line in commits:
        found = store.records.entry(line["id"])
        if found is None or found["commitSeq"] != line["seq"]:
            out.problem(f"acknowledged commit {line} is {found}")
    page = store.records.scan_entries({"conversationId": conversation}, 100_000)
    stored = len(page["items"])
    if stored < len(commits) or (final and stored > len(commits) + _ambiguous(ops, "commit")):
        out.problem(f"conversation {conversation}: {stored} entries for {len(commits)} acknowledged commits")


def _check_queues(
    store: durastate.Store, logs: dict[str, list[dict[str, Any]]], out: Outcome, redelivery_timeout: float
) -> None:
    pushed: set[str] = set()
    acked: Counter[str] = Counter()
    unknown: set[str] = set()  # an ack that raised: applied or not
    for lines in logs.values():
        for line in lines:
            if line["op"] == "push":
                pushed.add(line["item"])
            elif line["op"] == "ack":
                acked[line["item"]] += 1
            elif line["op"] == "ack_unknown":
                unknown.add(line["item"])
    twice = [item for item, n in acked.items() if n > 1]
    if twice:
        out.problem(f"queue items acknowledged twice: {twice[:5]}")
    # What is left: nacked (ready), abandoned (leased until their lease runs out), pushed by a call that
    # raised. Claim until every pushed item is settled, waiting for the leases.
    deadline = time.monotonic() + redelivery_timeout
    while not pushed <= set(acked) | unknown and time.monotonic() < deadline:
        job = store.queues.claim(WORK, lease=30, wait=max(0.0, min(LEASE, deadline - time.monotonic())))
        if job is None:
            continue
        item = job.payload.decode()
        job.ack()
        acked[item] += 1
        out.redelivered += 1
        if acked[item] > 1:
            out.problem(f"queue item {item} delivered again after it was acknowledged")
    missing = pushed - set(acked) - unknown
    if missing:
        out.problem(f"{len(missing)} pushed queue items never came back: {sorted(missing)[:5]}")
    woken = {line["item"] for lines in logs.values() for line in lines if line["op"] == "woke"}
    fed = {line["item"] for lines in logs.values() for line in lines if line["op"] == "wake_push"}
    while not fed <= woken and time.monotonic() < deadline:  # what the waiters had not taken when they stopped
        job = store.queues.claim(WAKE, lease=30, wait=max(0.0, min(LEASE, deadline - time.monotonic())))
        if job is not None:
            woken.add(job.payload.decode())
            job.ack()
    if fed - woken:
        out.problem(f"{len(fed - woken)} items pushed to the waiters' queue were lost")


if __name__ == "__main__":
    main(sys.argv[1:])
