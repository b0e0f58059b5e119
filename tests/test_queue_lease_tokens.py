"""Lease tokens come from os.urandom in blocks (queues.facet._lease_token): never one twice, across fork too."""

from __future__ import annotations

import os
import sys
import threading

import pytest

import durastate
from durastate.queues import facet


def test_tokens_are_distinct_across_blocks() -> None:
    tokens = [facet._lease_token() for _ in range(facet._TOKENS_AT_ONCE * 3 + 1)]
    assert len(set(tokens)) == len(tokens)
    assert {len(t) for t in tokens} == {facet._TOKEN_SIZE}


def test_threads_never_share_a_token() -> None:
    taken: list[list[bytes]] = [[] for _ in range(4)]
    start = threading.Barrier(len(taken))

    def take(into: list[bytes]) -> None:
        start.wait()
        for _ in range(2000):
            into.append(facet._lease_token())

    threads = [threading.Thread(target=take, args=(into,)) for into in taken]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [t for into in taken for t in into]
    assert len(set(every)) == len(every)


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "win32", reason="needs os.fork")
def test_a_forked_child_does_not_hand_out_its_parents_tokens() -> None:
    facet._lease_token()  # a block is drawn: the rest of it is what a child would inherit
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next token, to the parent
        try:
            os.write(writer, facet._lease_token())
        finally:
            os._exit(0)
    os.close(writer)
    child_token = os.read(reader, facet._TOKEN_SIZE)
    os.close(reader)
    os.waitpid(pid, 0)
    assert len(child_token) == facet._TOKEN_SIZE
    assert child_token != facet._lease_token()  # the parent's next one


def test_a_claim_holds_a_fresh_token_each_time(tmp_path: os.PathLike[str]) -> None:
    with durastate.open(os.path.join(tmp_path, "q.db")) as store:
        store.queues.push("jobs", [b"a", b"b"])
        first = store.queues.claim("jobs", lease=30)
        second = store.queues.claim("jobs", lease=30)
        assert first is not None and second is not None
        assert first._token != second._token
        first.ack()
        second.ack()
