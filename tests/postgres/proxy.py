"""A TCP relay in front of PostgreSQL that can cut a connection on cue.

Used to put a connection loss at the worst moment for retry safety: after
the server has executed (and, in autocommit, committed) a statement, but
before its reply reaches the client. ``drop_reply(marker)`` arms it: the
next client message containing ``marker`` is forwarded, and the server's
answer to it is swallowed while both sockets are closed.
``drop_request(marker)`` cuts before the statement reaches the server.

Statements are prepared on first use (``PREPARE_THRESHOLD`` 0): psycopg
then sends the text alone in a Parse message, in a round trip of its own,
and runs it afterwards by name (Bind, Execute). A marker found in such a
Parse-only message arms the cut for the message that runs that prepared
statement on the same connection, so "reply" still means after the server
ran it. A statement already prepared on a connection never shows its text
again: tests make sure the statement to cut runs on a new connection.

``flights`` counts round trips: a client message that follows an answer
from the server (on the same connection) starts a new flight. The server
answers a pipeline only at its flush or sync, so statements the client
sends without waiting for their answers are one flight, however many
network writes carry them. An error is the exception: the server sends it
at once, possibly between two writes of one pipeline; a client whose last
message asked for no answer (Parse, Bind, Describe, Execute, Close, CopyData)
was not waiting for it, so its next write continues the same flight.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading


def _messages(chunk: bytes) -> list[tuple[bytes, bytes]]:
    """The (type, body) frontend messages that start in ``chunk``, as far as they parse."""
    out = []
    at = 0
    while at + 5 <= len(chunk):
        kind = chunk[at : at + 1]
        (length,) = struct.unpack("!i", chunk[at + 1 : at + 5])
        if length < 4:
            break
        out.append((kind, chunk[at + 5 : at + 1 + length]))
        at += 1 + length
    return out


# Extended-protocol messages the server answers only at the next Sync or Flush.
_NO_ANSWER_ASKED = frozenset((b"P", b"B", b"D", b"E", b"C", b"d"))


class _ClientStream:
    """Follows the client's messages across network writes: does the last one sent ask for an answer?"""

    def __init__(self) -> None:
        self.unparsed = b""
        self.last_kind = b""

    def feed(self, chunk: bytes) -> bool:
        """Take one network write; whether the client now waits for the server (its messages ended asking)."""
        data = self.unparsed + chunk
        at = 0
        while True:
            # Untyped messages (startup, SSL and cancel requests) start with their length, whose first byte is 0.
            header = 4 if data[at : at + 1] == b"\x00" else 5
            if at + header > len(data):
                break
            (length,) = struct.unpack("!i", data[at + header - 4 : at + header])
            end = at + header - 4 + length
            if length < 4 or end > len(data):
                break
            self.last_kind = data[at : at + 1] if header == 5 else b""
            at = end
        self.unparsed = data[at:]
        return not self.unparsed and self.last_kind not in _NO_ANSWER_ASKED


def _prepared_name(chunk: bytes, marker: bytes) -> bytes | None:
    """The statement name if ``chunk`` only prepares (Parse, no Execute) a statement containing ``marker``."""
    messages = _messages(chunk)
    if any(kind == b"E" for kind, _ in messages):
        return None
    for kind, body in messages:
        if kind == b"P" and marker in body:
            name = body.split(b"\x00", 1)[0]
            return name or None
    return None


def _binds(chunk: bytes, name: bytes) -> bool:
    """Whether ``chunk`` runs the prepared statement ``name`` (a Bind message naming it)."""
    for kind, body in _messages(chunk):
        if kind == b"B":
            parts = body.split(b"\x00", 2)
            if len(parts) > 1 and parts[1] == name:
                return True
    return False


class CuttingProxy:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._marker: bytes | None = None
        self._mode = ""
        self.cuts = 0
        self.flights = 0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def drop_reply(self, marker: bytes) -> None:
        with self._lock:
            self._marker, self._mode = marker, "reply"

    def drop_request(self, marker: bytes) -> None:
        with self._lock:
            self._marker, self._mode = marker, "request"

    def close(self) -> None:
        self._closed = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            pair = _Pair(self, client, server)
            threading.Thread(target=pair.client_to_server, daemon=True).start()
            threading.Thread(target=pair.server_to_client, daemon=True).start()

    def _take(self, pair: _Pair, chunk: bytes) -> str:
        """The cut to make for this client chunk ('' for none); disarms."""
        with self._lock:
            if self._marker is None:
                return ""
            if pair.armed_name is not None and _binds(chunk, pair.armed_name):
                pair.armed_name = None
            elif self._marker in chunk:
                name = _prepared_name(chunk, self._marker)
                if name is not None:  # only prepared: cut where it runs
                    pair.armed_name = name
                    return ""
            else:
                return ""
            mode, self._marker, self._mode = self._mode, None, ""
            self.cuts += 1
            return mode


class _Pair:
    def __init__(self, proxy: CuttingProxy, client: socket.socket, server: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.server = server
        self.swallow_reply = threading.Event()
        # A prepared statement whose text held the marker: cut where it runs.
        self.armed_name: bytes | None = None
        # The server answered since the client last sent (the next send is a new flight if the client was waiting).
        self.answered = True
        self.stream = _ClientStream()
        self.waiting = True

    def _cut(self) -> None:
        for s in (self.client, self.server):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def client_to_server(self) -> None:
        try:
            while chunk := self.client.recv(65536):
                if self.answered and self.waiting:
                    self.answered = False
                    with self.proxy._lock:
                        self.proxy.flights += 1
                self.waiting = self.stream.feed(chunk)
                mode = self.proxy._take(self, chunk)
                if mode == "request":
                    self._cut()
                    return
                if mode == "reply":
                    self.swallow_reply.set()
                self.server.sendall(chunk)
        except OSError:
            pass
        self._cut()

    def server_to_client(self) -> None:
        try:
            while chunk := self.server.recv(65536):
                if self.swallow_reply.is_set():
                    # The server has answered: the statement ran to the end.
                    self._cut()
                    return
                self.answered = True  # before the client can read it and answer back
                self.client.sendall(chunk)
        except OSError:
            pass
        self._cut()
